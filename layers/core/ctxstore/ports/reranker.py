"""Reranker: orders candidate passages by relevance to a query (a cross-encoder style model).

Optional. No retrieval step calls it yet: `retrieval/thinking.py` reranks its fused pool with an
offline sentence-coverage score. See docs/aws.md ("Bedrock reranking") for how it plugs in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Ranked:
    index: int  # position of the passage in the texts given
    score: float  # the model's relevance score, higher is better; comparable only within one call


class Reranker(Protocol):
    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[Ranked]:
        """The top_n (default all) passages, best first. Raises StoreUnavailable when the service is
        throttled or down, so a caller can keep its own order instead of failing the query."""
        ...
