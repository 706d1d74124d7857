"""POST /query: one retrieval over knowledge and/or memories, fast or thinking, with its context.

fast      one hybrid pass (keyword + vector lanes, max-normalised convex fusion by alpha)
thinking  multi-query expansion, fusion of every pass, reranking of the fused candidates, and the
          forceful-relation context of the retrieved items (`additional_context`)
auto      a fast pass first; its signals (lane agreement, leader margin, clause count) pick the
          route, thinking when inconclusive; graph context follows the route

Collection weights and recency bias scale the fused scores, so several collections give one
globally ranked list. Results name the route and alpha that were used (`query_plan`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.items import ItemRecord
from ctxstore.ports.clock import Clock
from ctxstore.ports.embedder import Embedder
from ctxstore.ports.reranker import Reranker
from ctxstore.ports.search_index import ChunkDoc, SearchIndex, Store
from ctxstore.retrieval import feedback, thinking
from ctxstore.retrieval.fusion import Candidate, LaneHits, fuse, ranked
from ctxstore.retrieval.graph_context import GraphContext, GraphContextRequest, GraphContextSource
from ctxstore.retrieval.hybrid import HybridRetriever, RetrievalScope
from ctxstore.retrieval.signals import choose_alpha, route
from ctxstore.services.access.principal import Principal
from ctxstore.services.databases import DatabaseService
from ctxstore.services.items.service import ItemService
from ctxstore.services.query.live_top import RecordKey, live_top, may_relate
from ctxstore.services.query.request import QueryBody, QueryRequest, build_request, query_body

RECENCY_HALF_LIFE_S = 30 * 86400.0  # a 30-day-old item gets half the recency boost of a new one
MAX_FORCEFUL_CHUNKS = 50
FORCEFUL_CHUNKS_PER_ITEM = 3
_GRAPH_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ctxstore-graph-context")
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$", re.MULTILINE)


def candidate_depth(max_results: int) -> int:
    """Hits per lane: the z-scores need a stable sample (100 measured best), bounded for latency."""
    return min(300, max(100, 4 * max_results))


class QueryPlan(TypedDict):
    """How the answer was produced: the route taken and why, the lanes' mix, the queries run."""

    requested_mode: str
    mode: str
    reason: str
    alpha: float
    query_by: str
    queries: list[str]
    type: str


class _RankedAnswer(TypedDict):
    chunks: list[dict[str, Any]]
    sources: list[dict[str, Any]]
    additional_context: dict[str, dict[str, Any]]
    query_plan: QueryPlan


class QueryAnswer(_RankedAnswer, total=False):  # total=False: seen at run time too (postponed annotations)
    """POST /query's data: ranked chunks (search.V2Chunk), their sources (search.SourceInfo), context chunks
    by id, the plan, and the graph context when asked for and wired."""

    graph_context: GraphContext


@dataclass
class Answer:
    """The ranked candidates of one query and how they were produced."""

    ranked: list[Candidate]
    mode: str
    alpha: float
    reason: str
    queries: list[str]


class QueryService:
    def __init__(
        self,
        clock: Clock,
        databases: DatabaseService,
        items: ItemService,
        *,
        search_index: Callable[[], SearchIndex],
        embedder: Callable[[], Embedder | None],
        reranker: Callable[[], Reranker | None],
        graph_context: GraphContextSource | None = None,
    ) -> None:
        """`search_index`, `embedder`, `reranker`: providers, read per query (the service is built with the
        routes; on AWS a port read builds its client). `search_index` raises SERVICE_UNAVAILABLE where the
        deployment has none (registry); the embedder and reranker are None where none is configured."""
        self._clock = clock
        self._search_index = search_index
        self._embedder = embedder
        self._reranker = reranker
        self._databases = databases
        self._items = items
        self.graph_context = graph_context

    # ---- entry point ---------------------------------------------------------------------------
    def query(self, principal: Principal, body: QueryBody | Mapping[str, Any]) -> QueryAnswer:
        typed = query_body(body)
        schema = self._databases.schema(principal, str(typed.database))
        return self.run(principal, build_request(typed, schema))

    def run(self, principal: Principal, req: QueryRequest) -> QueryAnswer:
        self._search_index()  # 503 before any work where the deployment has no search index
        scope = RetrievalScope(
            org=principal.org,
            database=req.database,
            collections=list(req.collections),
            stores=req.stores,
            metadata=req.metadata,
            additional_metadata=req.additional_metadata,
            item_ids=req.ids,
        )
        answer = self.retrieve(scope, req)
        return self._render(principal.org, scope, req, answer)

    # ---- retrieval -----------------------------------------------------------------------------
    def retriever(self) -> HybridRetriever:
        return HybridRetriever(self._search_index(), self._embedder(), self._reranker())

    def retrieve(self, scope: RetrievalScope, req: QueryRequest) -> Answer:
        r = self.retriever()
        text_only = req.query_by == "text" or r.embedder is None
        depth = candidate_depth(req.max_results)
        vector_text = f"{req.additional_context}\n{req.query}" if req.additional_context else req.query
        first = r.run(
            scope, req.query, vector_text, keyword=True, vector=not text_only, operator=req.operator, depth=depth
        )
        kw_hits = sum(len(lh.hits) for lh in first.lanes if lh.lane == "keyword")
        vec_hits = sum(len(lh.hits) for lh in first.lanes if lh.lane == "vector")
        if text_only:
            alpha, alpha_reason = 0.0, "query_by=text: keywords only"
        elif req.alpha is not None:
            alpha, alpha_reason = req.alpha, "requested"
        else:
            choice = choose_alpha(req.query, kw_hits, vec_hits)
            alpha, alpha_reason = choice.alpha, f"auto: {choice.reason}"
        fused = self._score(fuse(first.lanes, alpha), req)
        if feedback.applies(first, alpha):
            first = feedback.refine(r, scope, first, fused, depth)
            fused = self._score(fuse(first.lanes, alpha), req)
        mode: str = req.mode
        reason = alpha_reason
        if req.mode == "auto":
            chosen = route(
                req.query,
                fused,
                _items_of(first.lanes, "keyword"),
                _items_of(first.lanes, "vector"),
                reranker=r.reranker is not None,
            )
            mode, reason = chosen.mode, f"{chosen.reason}; alpha {alpha_reason}"
        if mode == "fast":
            return Answer(fused, "fast", alpha, reason, [req.query])
        plan = thinking.think(
            r,
            scope,
            req.query,
            vector_text,
            first,
            alpha=alpha,
            operator=req.operator,
            depth=depth,
            text_only=text_only,
        )
        return Answer(self._score(plan.candidates, req), "thinking", alpha, reason, plan.queries)

    @staticmethod
    def _score(cands: dict[str, Candidate], req: QueryRequest) -> list[Candidate]:
        """Collection weights on top of relevance, then the global order."""
        items = list(cands.values())
        if any(w != 1.0 for w in req.collections.values()):
            for c in items:
                c.score *= req.collections.get(c.collection, 1.0)
        return ranked(items)

    def _recency(self, pool: list[Candidate], docs: dict[str, ChunkDoc], bias: float) -> list[Candidate]:
        """score x (1 + bias x 2^(-age / 30 days)): at bias 1 a new item counts up to twice an old one."""
        now = self._clock.now()
        for c in pool:
            d = docs.get(c.chunk_id)
            if d is not None and d.created_at > 0:
                age = max(0.0, now - d.created_at)
                c.score *= 1.0 + bias * math.pow(2.0, -age / RECENCY_HALF_LIFE_S)
        return ranked(pool)

    # ---- response ------------------------------------------------------------------------------
    def _render(self, org: str, scope: RetrievalScope, req: QueryRequest, answer: Answer) -> QueryAnswer:
        idx = self._search_index()
        pool = (
            answer.ranked[: max(3 * req.max_results, 30)] if req.recency_bias > 0 else answer.ranked[: req.max_results]
        )
        docs = {d.chunk_id: d for d in idx.get_chunks(org, [c.chunk_id for c in pool])}
        if req.recency_bias > 0:
            pool = self._recency(pool, docs, req.recency_bias)
        candidates = pool if req.recency_bias > 0 else answer.ranked
        want_graph = answer.mode == "thinking" if req.mode == "auto" else req.graph_context
        records: dict[RecordKey, ItemRecord | None] = {}
        top = live_top(idx, self._items, org, req.database, candidates, docs, records, req.max_results)
        # The graph engine's round trip runs beside the rendering below.
        graph: Future[GraphContext | None] | None = None
        if want_graph and self.graph_context is not None:
            graph = _GRAPH_POOL.submit(self._graph_context, org, req, top, dict(records))
        additional: dict[str, dict[str, Any]] = {}
        chunks = []
        for c in top:
            d = docs[c.chunk_id]
            rec = records.get((c.store, c.collection, c.item_id))
            view = chunk_view(d, rec, c.score)
            extra_ids: list[str] = []
            if req.num_related_chunks:
                for n in self._neighbours(org, d, req.num_related_chunks):
                    extra_ids.append(n.chunk_id)
                    additional.setdefault(n.chunk_id, chunk_view(n, rec, None))
            if req.query_apps and rec is not None and rec["source_type"] == "app":
                for n in self._thread_context(org, d, rec):
                    extra_ids.append(n.chunk_id)
                    additional.setdefault(n.chunk_id, chunk_view(n, None, None))
            view["extra_context_ids"] = list(dict.fromkeys(extra_ids))
            chunks.append(view)
        if answer.mode == "thinking" and req.forceful_relations:
            for chunk_id, view in self._forceful(org, req, top, records).items():
                additional.setdefault(chunk_id, view)
        data: QueryAnswer = {
            "chunks": chunks,
            "sources": self._sources(top, records),
            "additional_context": {k: v for k, v in additional.items() if k not in {c.chunk_id for c in top}},
            "query_plan": {
                "requested_mode": req.mode,
                "mode": answer.mode,
                "reason": answer.reason,
                "alpha": round(answer.alpha, 3),
                "query_by": req.query_by,
                "queries": answer.queries,
                "type": req.type,
            },
        }
        if graph is not None:
            gc = graph.result()
            if gc is not None:
                data["graph_context"] = gc
        return data

    def _graph_context(
        self, org: str, req: QueryRequest, top: Sequence[Candidate], records: Mapping[RecordKey, ItemRecord | None]
    ) -> GraphContext | None:
        assert self.graph_context is not None
        merged: GraphContext | None = None
        for store in req.stores:
            in_store = [c for c in top if c.store == store]
            # Only graphs that hold a retrieved chunk can relate one (one graph per collection), and only if one of
            # its items may carry a relation (live_top.may_relate); the chunks keep their ranks either way.
            related = [c.collection for c in in_store if may_relate(records.get((c.store, c.collection, c.item_id)))]
            gc = self.graph_context.graph_context(
                GraphContextRequest(
                    org=org,
                    database=req.database,
                    collections=list(dict.fromkeys(related)),
                    store=store,
                    query=req.query,
                    chunk_ids=[c.chunk_id for c in in_store],
                    item_ids=list(dict.fromkeys(c.item_id for c in in_store)),
                )
            )
            merged = _merge_graph(merged, gc)
        return merged

    def _neighbours(self, org: str, d: ChunkDoc, n: int) -> list[ChunkDoc]:
        idx = self._search_index()
        siblings = idx.item_chunks(org, d.database, d.collection, d.store, d.item_id)
        return [s for s in siblings if s.chunk_id != d.chunk_id and abs(s.position - d.position) <= n]

    def _thread_context(self, org: str, d: ChunkDoc, rec: ItemRecord) -> list[ChunkDoc]:
        """App-aware context: the first chunk of the item's parent and of its thread's root item."""
        idx = self._search_index()
        out: list[ChunkDoc] = []
        for other in dict.fromkeys(x for x in (rec["parent_id"], rec["thread_id"]) if x):
            if other == d.item_id:
                continue
            out += idx.item_chunks(org, d.database, d.collection, d.store, str(other))[:1]
        return out

    def _forceful(
        self,
        org: str,
        req: QueryRequest,
        top: Sequence[Candidate],
        records: dict[tuple[str, str, str], ItemRecord | None],
    ) -> dict[str, dict[str, Any]]:
        """Chunks of the items that retrieved items declare as related (`relations.ids`)."""
        idx = self._search_index()
        out: dict[str, dict[str, Any]] = {}
        seen: set[tuple[str, str]] = set()
        for c in top:
            rec = records.get((c.store, c.collection, c.item_id))
            for rid in (rec["relations"] or []) if rec is not None else []:
                if (c.collection, rid) in seen or len(out) >= MAX_FORCEFUL_CHUNKS:
                    continue
                seen.add((c.collection, rid))
                found = self._items.find(org, req.database, c.collection, str(rid))
                if found is None:
                    continue
                ref, related = found
                store = cast(Store, ref.store)
                for d in idx.item_chunks(org, ref.database, ref.collection, store, ref.item_id)[
                    :FORCEFUL_CHUNKS_PER_ITEM
                ]:
                    view = chunk_view(d, related.data, None)
                    view["related_from"] = c.item_id
                    out[d.chunk_id] = view
        return out

    @staticmethod
    def _sources(
        top: Sequence[Candidate], records: dict[tuple[str, str, str], ItemRecord | None]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen: set[tuple[str, str, str]] = set()
        for c in top:
            key = (c.store, c.collection, c.item_id)
            if key in seen:
                continue
            seen.add(key)
            out.append(source_view(c.store, c.collection, c.item_id, records.get(key)))
        return out


def _when(value: Any) -> str | None:
    try:
        ts = float(value)
    except (TypeError, ValueError):
        return None
    return iso(ts) if ts > 0 else None


def _source_type(rec: ItemRecord | None, d: ChunkDoc) -> str:
    if rec is not None and rec["source_type"] == "app":
        return str(rec["provider"] or rec["app_type"] or "app")
    return str((rec["source_type"] if rec else None) or d.source_type or ("memory" if d.store == "memory" else "file"))


def chunk_view(d: ChunkDoc, rec: ItemRecord | None, score: float | None) -> dict[str, Any]:
    """search.V2Chunk; without `rec` (a thread's context chunk) from the chunk alone."""
    title = md = amd = created = updated = None
    if rec is not None:
        title, md, amd = rec["title"], rec["metadata"], rec["additional_metadata"]
        created, updated = rec["created_at"], rec["updated_at"] or rec["created_at"]
    view: dict[str, Any] = {
        "chunk_uuid": d.chunk_id,
        "id": d.item_id,
        "chunk_content": d.text,
        "source_title": str(title or d.title or ""),
        "source_type": _source_type(rec, d),
        "type": d.store,
        "collection": d.collection,
        "sub_tenant_id": d.collection,
        "metadata": dict(md or d.metadata),
        "additional_metadata": dict(amd or d.additional_metadata),
        "layout": "table" if _TABLE_LINE.search(d.text) else "text",
        "position": d.position,
        "extra_context_ids": [],
        "source_upload_time": _when(created or d.created_at),
        "source_last_updated_time": _when(updated or d.created_at),
    }
    if score is not None:  # fused scores are unbounded (z-scores): s/(1+s) keeps the order within 0..1
        view["relevancy_score"] = round(max(0.0, float(score)) / (1.0 + max(0.0, float(score))), 6)
    return view


def source_view(store: Store, collection: str, item_id: str, rec: ItemRecord | None) -> dict[str, Any]:
    """search.SourceInfo. Items keep no `url` or `description` (the reference's fields): they answer null."""
    if rec is None:
        return _source_info(store, collection, item_id)
    app = rec["source_type"] == "app"
    return _source_info(
        store,
        collection,
        item_id,
        title=str(rec["title"] or ""),
        source_type=rec["source_type"],
        metadata=dict(rec["metadata"] or {}),
        additional_metadata=dict(rec["additional_metadata"] or {}),
        timestamp=_when(rec["timestamp"] or rec["created_at"]),
        app_kind=rec["app_type"] if app else None,
        app_provider=rec["provider"] if app else None,
        app_external_id=rec["external_id"] if app else None,
    )


def _source_info(
    store: Store,
    collection: str,
    item_id: str,
    *,
    title: str = "",
    source_type: str | None = None,
    metadata: dict[str, Any] | None = None,
    additional_metadata: dict[str, Any] | None = None,
    timestamp: str | None = None,
    app_kind: str | None = None,
    app_provider: str | None = None,
    app_external_id: str | None = None,
) -> dict[str, Any]:
    return {
        "id": item_id,
        "title": title,
        "type": store,
        "source_type": source_type,
        "collection": collection,
        "sub_tenant_id": collection,
        "metadata": metadata or {},
        "additional_metadata": additional_metadata or {},
        "timestamp": timestamp,
        "url": None,
        "description": None,
        "app_kind": app_kind,
        "app_provider": app_provider,
        "app_external_id": app_external_id,
    }


def _merge_graph(have: GraphContext | None, new: GraphContext) -> GraphContext:
    if have is None:
        return new
    return {
        "chunk_relations": have["chunk_relations"] + new["chunk_relations"],
        "query_paths": have["query_paths"] + new["query_paths"],
        "chunk_id_to_group_ids": have["chunk_id_to_group_ids"] | new["chunk_id_to_group_ids"],
    }


def _items_of(lanes: Sequence[LaneHits], lane: str) -> list[str]:
    best: dict[str, float] = {}
    for lh in lanes:
        if lh.lane != lane:
            continue
        for h in lh.hits:
            best[h.item_id] = max(best.get(h.item_id, float("-inf")), h.score)
    return [k for k, _ in sorted(best.items(), key=lambda kv: -kv[1])]
