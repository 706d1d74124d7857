"""Extractor: entities and relations from text, and preferences/facts from memories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ExtractedEntity:
    key: str
    name: str
    type: str
    namespace: str = ""


@dataclass(frozen=True)
class ExtractedRelation:
    source: str  # entity key
    target: str
    raw_predicate: str
    canonical_predicate: str
    context: str
    confidence: float
    temporal_details: str | None = None


@dataclass(frozen=True)
class Extraction:
    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)


class Extractor(Protocol):
    """Entities and relations from chunk text (offline rules by default, an LLM when configured)."""

    def extract(self, text: str) -> Extraction: ...


@runtime_checkable
class BatchExtractor(Extractor, Protocol):
    """An extractor that is cheaper per text when given many at once (spaCy's `pipe` batches its models)."""

    def extract_many(self, texts: list[str]) -> list[Extraction]: ...


class MemoryInferrer(Protocol):
    """For memories ingested with infer=true: what the user prefers or states about themselves."""

    def infer_memories(self, texts: Sequence[str], user_name: str | None = None) -> list[str]:
        """Preferences and facts stated by the user, each as a standalone third-person sentence."""
        ...
