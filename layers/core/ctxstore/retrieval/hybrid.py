"""One retrieval pass: keyword and vector lanes over the requested stores, run concurrently.

The query embedding (onnxruntime) and the FTS5 search (SQLite) both release the GIL, so the keyword
lanes run on a worker thread while the query is embedded; the vector lanes follow.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxstore import observability as obs
from ctxstore.ports.embedder import Embedder
from ctxstore.ports.reranker import Reranker
from ctxstore.ports.search_index import SearchFilter, SearchIndex, Store
from ctxstore.retrieval.fusion import LaneHits, lane_hits

Vector = npt.NDArray[np.float32]

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ctxstore-retrieval")


@dataclass(frozen=True)
class RetrievalScope:
    org: str
    database: str
    collections: Sequence[str]
    stores: Sequence[Store]
    metadata: dict[str, Any] = field(default_factory=dict)
    additional_metadata: dict[str, Any] = field(default_factory=dict)
    item_ids: Sequence[str] | None = None

    def filter(self, store: Store) -> SearchFilter:
        return SearchFilter(
            database=self.database,
            collections=list(self.collections),
            store=store,
            metadata=self.metadata,
            additional_metadata=self.additional_metadata,
            item_ids=self.item_ids,
        )


@dataclass
class Pass:
    """The lanes of one query text, and the vector that was used (reused by feedback steps)."""

    lanes: list[LaneHits]
    vector: Vector | None = None


class HybridRetriever:
    def __init__(self, index: SearchIndex, embedder: Embedder | None, reranker: Reranker | None = None) -> None:
        self.index = index
        self.embedder = embedder
        self.reranker = reranker

    def keyword_lanes(self, scope: RetrievalScope, text: str, operator: str, depth: int) -> list[LaneHits]:
        return [
            lane_hits(
                store,
                "keyword",
                self.index.keyword_search(scope.org, scope.filter(store), text, limit=depth, operator=operator),
                depth,
            )
            for store in scope.stores
        ]

    def vector_lanes(
        self, scope: RetrievalScope, vector: Vector, depth: int, *, narrow: bool = False
    ) -> list[LaneHits]:
        """`narrow`: the vector is near rows already found (the feedback search): see SearchIndex.vector_search."""
        return [
            lane_hits(
                store,
                "vector",
                self.index.vector_search(scope.org, scope.filter(store), vector, limit=depth, narrow=narrow),
                depth,
            )
            for store in scope.stores
        ]

    def embed(self, text: str) -> Vector | None:
        if self.embedder is None or not text.strip():
            return None
        return self.embedder.embed_query(text)

    def run(
        self,
        scope: RetrievalScope,
        keyword_text: str,
        vector_text: str,
        *,
        keyword: bool,
        vector: bool,
        operator: str,
        depth: int,
        vector_override: Vector | None = None,
    ) -> Pass:
        pending: Future[list[LaneHits]] | None = None
        if keyword:
            # The lane's thread runs in a copy of this context: its span is a child of the query's.
            pending = _POOL.submit(contextvars.copy_context().run, self._keyword, scope, keyword_text, operator, depth)
        lanes: list[LaneHits] = []
        qvec: Vector | None = None
        try:
            if vector:
                if vector_override is not None:
                    qvec = vector_override
                else:
                    with obs.timed(obs.QUERY_LANE, "query.embed", lane="embed"):
                        qvec = self.embed(vector_text)
                if qvec is not None:
                    with obs.timed(obs.QUERY_LANE, "query.vector_lanes", lane="vector"):
                        lanes += self.vector_lanes(scope, qvec, depth)
        finally:
            if pending is not None:
                lanes = pending.result() + lanes
        return Pass(lanes, qvec)

    def _keyword(self, scope: RetrievalScope, text: str, operator: str, depth: int) -> list[LaneHits]:
        with obs.timed(obs.QUERY_LANE, "query.keyword_lanes", lane="keyword"):
            return self.keyword_lanes(scope, text, operator, depth)

    def with_items(self, scope: RetrievalScope, item_ids: Sequence[str]) -> RetrievalScope:
        return replace(scope, item_ids=list(item_ids))
