"""Reranker: orders candidate passages by relevance to a query (a cross-encoder style model).

Optional (`Container.reranker`). When set, `retrieval/thinking.py` lets it order the fused pool of a
thinking query; when unset or unavailable, thinking uses its offline sentence-coverage rerank.
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
