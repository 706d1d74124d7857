"""One retrieval pass: keyword and vector lanes over the requested stores, run concurrently.

The query embedding (onnxruntime) and the FTS5 search (SQLite) both release the GIL, so the keyword
lanes run on a worker thread while the query is embedded; the vector lanes follow. A step that needs the
keyword lanes and the query vector (`then`: the feedback search, retrieval/feedback.py) runs on the keyword
thread as soon as both exist, beside the vector lanes (the HNSW search releases the GIL too).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
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
    then: list[LaneHits] | None = None  # what `run`'s `then` step answered, if it ran


# After the keyword lanes, given them and the query vector: more lanes, or None.
ThenStep = Callable[[list[LaneHits], Vector], list[LaneHits] | None]


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
        then: ThenStep | None = None,
    ) -> Pass:
        pending: Future[tuple[list[LaneHits], list[LaneHits] | None]] | None = None
        query_vector: Future[Vector | None] = Future()
        if keyword:
            # The lane's thread runs in a copy of this context: its span is a child of the query's.
            step = then if vector else None
            run = contextvars.copy_context().run
            pending = _POOL.submit(run, self._keyword, scope, keyword_text, operator, depth, step, query_vector)
        lanes: list[LaneHits] = []
        qvec: Vector | None = None
        after: list[LaneHits] | None = None
        try:
            if vector:
                if vector_override is not None:
                    qvec = vector_override
                else:
                    with obs.timed(obs.QUERY_LANE, "query.embed", lane="embed"):
                        qvec = self.embed(vector_text)
                query_vector.set_result(qvec)
                if qvec is not None:
                    with obs.timed(obs.QUERY_LANE, "query.vector_lanes", lane="vector"):
                        lanes += self.vector_lanes(scope, qvec, depth)
        finally:
            if not query_vector.done():
                query_vector.set_result(None)  # the keyword thread's step must not wait for ever
            if pending is not None:
                keyword_lanes, after = pending.result()
                lanes = keyword_lanes + lanes
        return Pass(lanes, qvec, after)

    def _keyword(
        self,
        scope: RetrievalScope,
        text: str,
        operator: str,
        depth: int,
        then: ThenStep | None,
        query_vector: Future[Vector | None],
    ) -> tuple[list[LaneHits], list[LaneHits] | None]:
        with obs.timed(obs.QUERY_LANE, "query.keyword_lanes", lane="keyword"):
            lanes = self.keyword_lanes(scope, text, operator, depth)
        if then is None:
            return lanes, None
        qvec = query_vector.result()
        return lanes, then(lanes, qvec) if qvec is not None else None

    def with_items(self, scope: RetrievalScope, item_ids: Sequence[str]) -> RetrievalScope:
        return replace(scope, item_ids=list(item_ids))
