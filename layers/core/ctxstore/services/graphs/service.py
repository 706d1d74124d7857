"""Both graphs of a scope: the ingestion graph step, deletes, `GET /context/relations`,
`GET /context/{id}/subgraph` and the graph context of `POST /query`.

Graphs are isolated per organisation (by the graph port), database, collection and store.
A `graph_payload` stored for an item replaces extraction for it (whole graph, origin byog);
otherwise the extractor reads each chunk. Readers (`additional_metadata.acl`) are copied
onto source nodes and evidence edges so `acl` filters run inside the graph.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxstore.domain.chunking import Chunk
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.graph_keys import (
    GRAPH_PREFIX,
    database_graph_prefix,
    graph_name,
    item_readers,
)
from ctxstore.domain.items import STORES, ItemRecord, ItemRef
from ctxstore.ports.blobs import BlobStore
from ctxstore.ports.extractor import BatchExtractor, Extractor
from ctxstore.ports.graph import GraphQueryError, GraphStore
from ctxstore.ports.records import RecordStore
from ctxstore.retrieval.graph_context import GraphContext, GraphContextRequest
from ctxstore.services.access.principal import Principal
from ctxstore.services.databases import DatabaseService
from ctxstore.services.graphs import payloads as graph_payloads
from ctxstore.services.graphs.answer_context import answer_graph_context
from ctxstore.services.graphs.answers import RelationsAnswer, SubgraphAnswer
from ctxstore.services.graphs.entity_graph import (
    EntityGraph,
    ItemRows,
    entity_ref,
    evidence,
)
from ctxstore.services.graphs.graph_rows import GraphRows, extracted_rows, source_props, supplied_rows
from ctxstore.services.graphs.item_graph import (
    RELATION_ORDER,
    ItemGraph,
    SourceProps,
    source_entity,
    structural_evidence,
)
from ctxstore.services.graphs.shapes import item_access, member_row, positive_int
from ctxstore.services.items.service import ItemService
from ctxstore.services.query.ranking_cache import RankingCache

MAX_RELATIONS_LIMIT = 10000
DEFAULT_RELATIONS_LIMIT = 5000
MAX_DEPTH = 10
MAX_SOURCES = 1000
AUX_CAP = 1000
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.MULTILINE)  # "# Title" -> "Title." (its own sentence)

INDEXES = (
    "CREATE INDEX FOR (e:Entity) ON (e.eid)",
    "CREATE INDEX FOR (s:Source) ON (s.sid)",
    "CREATE INDEX FOR (s:Source) ON (s.thread_id)",
    "CREATE INDEX FOR (s:Source) ON (s.parent_id)",
    "CREATE INDEX FOR ()-[r:REL]-() ON (r.item_id)",
    "CREATE INDEX FOR ()-[r:REL]-() ON (r.chunk_id)",
)


class GraphService:
    def __init__(
        self,
        records: RecordStore,
        databases: DatabaseService,
        items: ItemService,
        *,
        graph: Callable[[], GraphStore],
        blobs: Callable[[], BlobStore],
        extractor: Callable[[], Extractor | None],
    ) -> None:
        """Built only where the deployment has a graph store. `graph`, `blobs`, `extractor`: providers, read per
        call (the query function builds this service for graph context but may never touch the graph; blobs and
        the extractor serve only the graph step). The extractor is None where none is configured (AWS unless
        CTXSTORE_EXTRACTOR=bedrock, or CTXSTORE_EXTRACTOR=none)."""
        self._records = records
        self._databases = databases
        self._items = items
        self._graph_port = graph
        self._blobs = blobs
        self._extractor = extractor
        self._indexed: set[tuple[str, str]] = set()
        self._rankings = RankingCache()

    @property
    def _graph(self) -> GraphStore:
        return self._graph_port()

    @property
    def entities(self) -> EntityGraph:
        return EntityGraph(self._graph)

    @property
    def item_graph(self) -> ItemGraph:
        return ItemGraph(self._graph)

    def _ensure_indexes(self, org: str, graph: str) -> None:
        if (org, graph) in self._indexed:
            return
        for statement in INDEXES:
            try:
                self._graph.query(org, graph, statement)
            except GraphQueryError as exc:  # already there (a restart, another worker)
                if "already indexed" not in str(exc).lower():
                    raise
        self._indexed.add((org, graph))

    # ---- ingestion -----------------------------------------------------------------------
    def graph_step(self, org: str, ref: ItemRef, record: ItemRecord, chunks: list[Chunk]) -> int:
        """Build the item's share of both graphs; answers how many relations it holds now."""
        [rows] = self.prepare_many(org, [(ref, chunks)])
        [count] = self.write_many(org, [(ref, record, rows)])
        return count

    def prepare_many(self, org: str, items: Sequence[tuple[ItemRef, list[Chunk]]]) -> list[GraphRows]:
        """What the graph step writes for each item: its `graph_payload`, or what the extractor finds in its
        chunks (one extractor call for all the items' chunks: spaCy is cheaper per text in a batch, and the
        extraction process is reached once). Reads no graph, takes no lock."""
        out: list[GraphRows | None] = []
        extract: list[tuple[int, list[Chunk]]] = []
        for i, (ref, chunks) in enumerate(items):
            payload = graph_payloads.load(self._records, self._blobs(), org, ref)
            out.append(supplied_rows(payload, chunks) if payload is not None else None)
            if payload is None:
                extract.append((i, chunks))
        found = self._extracted([chunks for _, chunks in extract])
        for (i, _), rows in zip(extract, found, strict=True):
            out[i] = rows
        return [rows if rows is not None else GraphRows([], []) for rows in out]

    def write_many(self, org: str, items: Sequence[tuple[ItemRef, ItemRecord, GraphRows]]) -> list[int]:
        """Write prepared items into both graphs of their scopes, a few round trips per scope for them all
        (the same graph as one item at a time); answers each item's relation count."""
        counts: dict[int, int] = {}
        by_graph: dict[str, list[int]] = {}
        for i, (ref, _, _) in enumerate(items):
            by_graph.setdefault(graph_name(ref.store, ref.database, ref.collection), []).append(i)
        for graph, members in by_graph.items():
            self._ensure_indexes(org, graph)
            sources: list[tuple[SourceProps, list[tuple[str, str]]]] = []
            rows: list[ItemRows] = []
            for i in members:
                ref, record, found = items[i]
                access = item_access(record)
                links = [(str(link["id"]), str(link["relation"])) for link in record["relates_to"] or []]
                sources.append((source_props(ref, record, access), links))
                rows.append(ItemRows(ref.item_id, found.entities, found.relations, access))
            self.item_graph.upsert_sources(org, graph, sources)
            for i, count in zip(members, self.entities.replace_items(org, graph, rows), strict=True):
                counts[i] = count
        return [counts[i] for i in range(len(items))]

    def _extracted(self, items: Sequence[Sequence[Chunk]]) -> list[GraphRows]:
        """Entities and relations the extractor finds in each item's chunks (one call for them all)."""
        extractor = self._extractor()
        if extractor is None or not items:
            return [GraphRows([], []) for _ in items]
        texts = [_HEADING.sub(r"\1.", c.text) for chunks in items for c in chunks]
        if isinstance(extractor, BatchExtractor):
            found_all = iter(extractor.extract_many(texts))
        else:
            found_all = iter([extractor.extract(t) for t in texts])
        return [extracted_rows(chunks, [next(found_all) for _ in chunks]) for chunks in items]

    # ---- deletes and metadata ------------------------------------------------------------
    def purge_item(self, org: str, ref: ItemRef) -> None:
        graph = graph_name(ref.store, ref.database, ref.collection)
        self.entities.remove_item(org, graph, ref.item_id)
        self.item_graph.remove_source(org, graph, ref.item_id)

    def purge_scope(self, org: str, database: str, collection: str | None) -> None:
        for store in STORES:
            if collection is not None:
                names = [graph_name(store, database, collection)]
            else:
                names = self._graph.list_graphs(org, database_graph_prefix(store, database))
            for name in names:
                self._graph.drop(org, name)
                self._indexed.discard((org, name))

    def update_access(self, org: str, ref: ItemRef, record: ItemRecord) -> None:
        """After a metadata change: the item's readers on its node and evidence."""
        graph = graph_name(ref.store, ref.database, ref.collection)
        access = item_access(record)
        self.item_graph.set_access(org, graph, ref.item_id, access.acl, access.public)
        self.entities.set_access(org, graph, ref.item_id, access)

    # ---- GET /context/relations ----------------------------------------------------------
    def relations(
        self,
        principal: Principal,
        database: str,
        collection: str,
        store: str,
        *,
        item_id: str | None,
        limit_raw: str | None,
        cursor_raw: str | None,
        principals: list[str] | None,
    ) -> RelationsAnswer:
        self._databases.require(principal, database)
        limit = positive_int(limit_raw, "limit", DEFAULT_RELATIONS_LIMIT)
        if not 1 <= limit <= MAX_RELATIONS_LIMIT:
            raise invalid(f"'limit' must be from 1 to {MAX_RELATIONS_LIMIT}")
        offset = self._cursor(cursor_raw)
        org = principal.org
        graph = graph_name(store, database, collection)
        aux: list[dict[str, Any]] = []
        aux_truncated = False
        if item_id is not None:
            ref = ItemRef(database, collection, store, item_id)
            rec = self._items.get(org, ref)
            if rec is None:
                raise ApiError(ErrorCode.SOURCE_NOT_FOUND, f"no source '{item_id}' in this database and collection")
            groups: list[dict[str, Any]] = []
            if self._visible(rec.data, principals):
                groups = self.entities.item_groups(org, graph, item_id, principals=principals)
                aux, aux_truncated = self._mention_relations(org, graph, {item_id: rec.data}, epoch=False)
            total = len(groups)
            page = groups[offset : offset + limit]
        else:
            pairs, total = self._ranked_page(org, graph, principals, offset, limit)
            page = self.entities.groups(org, graph, pairs, principals=principals, epoch=False)
        more = offset + len(page) < total
        return {
            "success": True,
            "message": "Success",
            "relations": page,
            "auxiliary_relations": aux,
            "auxiliary_truncated": aux_truncated,
            "is_truncated": more,
            "next_cursor": float(offset + len(page)) if more else None,
        }

    def _ranked_page(
        self, org: str, graph: str, principals: list[str] | None, offset: int, limit: int
    ) -> tuple[list[tuple[str, str]], int]:
        """A page of the collection's ranked pairs and their number, from the cache while the graph's
        version token is unchanged (a graph without one is never cached)."""
        eg = self.entities
        token = eg.version(org, graph)
        key = (org, graph, None if principals is None else tuple(sorted(set(principals))), offset, limit)
        page = self._rankings.get(key, token) if token is not None else None
        if page is None:
            page = eg.ranked_pairs(org, graph, principals=principals, offset=offset, limit=limit)
            if token is not None:
                self._rankings.put(key, token, page)
        return list(page[0]), page[1]

    @staticmethod
    def _cursor(raw: str | None) -> int:
        """The cursor is the number a previous answer gave as next_cursor (its position in the ranking)."""
        if raw is None or raw == "":
            return 0
        try:
            value = float(raw)
        except ValueError:
            raise invalid("'cursor' must be the numeric next_cursor of a previous answer") from None
        if value < 0 or value != int(value):
            raise invalid("'cursor' must be the numeric next_cursor of a previous answer")
        return int(value)

    @staticmethod
    def _visible(record: ItemRecord, principals: list[str] | None) -> bool:
        if principals is None:
            return True
        readers = item_readers(record["additional_metadata"])
        return readers is None or bool(set(readers) & set(principals))

    def _mention_relations(
        self, org: str, graph: str, members: Mapping[str, Mapping[str, Any]], *, epoch: bool
    ) -> tuple[list[dict[str, Any]], bool]:
        """Structural relations recorded from the items: each member mentions entities (empty context)."""
        rows = self.entities.mentions(org, graph, list(members), AUX_CAP + 1)
        out = []
        for sid, ent in rows[:AUX_CAP]:
            m = members[sid]
            member = {
                "source_id": sid,
                "title": m.get("title") or "",
                "app_provider": m.get("provider") or m.get("app_provider") or "",
            }
            ts = float(m.get("ts") or m.get("timestamp") or 0.0)
            ev = structural_evidence("mentions", sid, str(ent.get("eid")), ts)
            if not epoch:
                ev["timestamp"] = evidence({"ts": ts}, epoch=False)["timestamp"]
            out.append({"source": source_entity(member), "target": entity_ref(ent), "relations": [ev], "chunk_id": ""})
        return out, len(rows) > AUX_CAP

    # ---- GET /context/{id}/subgraph ------------------------------------------------------
    def subgraph(
        self,
        principal: Principal,
        database: str,
        collection: str,
        store: str,
        item_id: str,
        *,
        depth_raw: str | None,
        max_sources_raw: str | None,
        principals: list[str] | None,
    ) -> SubgraphAnswer:
        self._databases.require(principal, database)
        try:
            depth = positive_int(depth_raw, "depth", 5)
        except ApiError:
            raise ApiError(ErrorCode.INVALID_INPUT, "'depth' must be an integer from 1 to 10") from None
        if not 1 <= depth <= MAX_DEPTH:
            raise ApiError(ErrorCode.INVALID_INPUT, f"'depth' must be from 1 to {MAX_DEPTH}, not {depth}")
        max_sources = max(1, min(MAX_SOURCES, positive_int(max_sources_raw, "max_sources", 200)))
        org = principal.org
        graph = graph_name(store, database, collection)
        ig = self.item_graph
        answer: SubgraphAnswer = {
            "seed_source_id": item_id,
            "sources": [],
            "relations": [],
            "auxiliary_relations": [],
            "auxiliary_truncated": False,
            "is_truncated": False,
            "max_depth_reached": 0,
            "success": True,
            "message": "Success",
        }
        start = ig.start(org, graph, item_id, principals)
        if start is None:
            return answer
        members: dict[str, dict[str, Any]] = {item_id: start}
        listing = [member_row(start, 0, None, None)]
        truncated = False
        frontier = [item_id]
        level = 0
        threads_seen: set[str] = set()
        expanded = gained = 0  # frontier sources expanded so far and the new members they gave
        beyond: list[str] = []  # once max_sources is reached: sources whose neighbours were not read
        while frontier and level < depth and not truncated and not beyond:
            level += 1
            nxt: list[str] = []
            pos = 0
            # The frontier is read in slices sized to what max_sources still admits (from the yield so
            # far), so a walk that fills up does not fetch the neighbours of a whole level. Slices keep
            # frontier order, so the order of discovery is the same as one read of the whole level.
            while pos < len(frontier) and not truncated:
                room = max_sources - len(members)
                if room <= 0:
                    beyond = frontier[pos:] + nxt
                    break
                size = len(frontier) - pos
                if expanded:
                    size = min(size, max(1, math.ceil(1.5 * room * expanded / max(gained, 1))))
                chunk = frontier[pos : pos + size]
                pos += size
                found, capped = ig.neighbours(org, graph, {f: members[f] for f in chunk}, principals, threads_seen)
                truncated = capped
                order = {sid: i for i, sid in enumerate(chunk)}
                found.sort(key=lambda f: (order[f[0]], RELATION_ORDER[f[3]], float(f[1].get("ts") or 0), f[1]["sid"]))
                expanded += len(chunk)
                for src, props, rel, _kind in found:
                    sid = str(props["sid"])
                    if sid in members:
                        continue
                    if len(members) >= max_sources:
                        truncated = True
                        break
                    members[sid] = props
                    listing.append(member_row(props, level, src, rel))
                    nxt.append(sid)
                    gained += 1
            frontier = nxt
        if not beyond and frontier and level >= depth:
            beyond = frontier  # an unexpanded frontier at the depth limit
        if beyond and not truncated:
            # truncated if those sources still reach someone new
            truncated = ig.reaches_beyond(org, graph, {f: members[f] for f in beyond}, list(members), principals)
        answer["sources"] = listing
        answer["max_depth_reached"] = max(m["depth"] for m in listing)
        answer["is_truncated"] = truncated
        answer["relations"] = self._member_relations(org, graph, members, listing)
        aux, aux_truncated = self._mention_relations(org, graph, members, epoch=False)
        answer["auxiliary_relations"] = aux
        answer["auxiliary_truncated"] = aux_truncated
        return answer

    def _member_relations(
        self, org: str, graph: str, members: dict[str, dict[str, Any]], listing: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        by_id = {m["source_id"]: m for m in listing}
        out: list[dict[str, Any]] = []

        def triplet(a: str, b: str, predicate: str) -> None:
            ts = float(members[b].get("ts") or 0.0)
            ev = structural_evidence(predicate, a, b, ts)
            ev["timestamp"] = evidence({"ts": ts}, epoch=False)["timestamp"]
            ends = {"source": source_entity(by_id[a]), "target": source_entity(by_id[b])}
            out.append({**ends, "relations": [ev], "chunk_id": ""})

        for a, b, rel in self.item_graph.links_among(org, graph, list(members)):
            triplet(a, b, rel)
        for sid, props in members.items():
            parent = props.get("parent_id")
            if parent and parent in members:
                triplet(str(parent), sid, "parent_of")
        threads: dict[str, list[str]] = {}
        for sid, props in members.items():
            if props.get("thread_id"):
                threads.setdefault(str(props["thread_id"]), []).append(sid)
        for ids in threads.values():  # a chain in time order, not every pair of the thread
            ids.sort(key=lambda s: (float(members[s].get("ts") or 0), s))
            for a, b in itertools.pairwise(ids):
                triplet(a, b, "same_thread")
        return out

    # ---- POST /query graph context (retrieval.graph_context.GraphContextSource) ----------
    def graph_context(self, request: GraphContextRequest) -> GraphContext:
        return answer_graph_context(self.entities, request)


__all__ = ["GRAPH_PREFIX", "GraphService"]
