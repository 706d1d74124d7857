"""The entity-relation graph of one scope: writes per item, the relations read, the query's graph context.

Nodes `(:Entity {eid, name, type, namespace})` are shared by every item that mentions them
(the id is a hash of normalised name + type + namespace). Each piece of evidence is one
`[:REL]` edge carrying the item, chunk, predicates, sentence, confidence, time, origin
and the item's readers; `[:GROUP]` edges keep one precomputed score per (source, target)
pair so a collection-wide read ranks groups without aggregating every edge.

Only portable openCypher with parameters. Edge-index lookups use unlabelled end nodes
(`(a)-[r:REL]->(b) WHERE r.item_id = $id`): a labelled end node makes the engine scan.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.graph_keys import principal_tokens
from ctxstore.ports.graph import GraphEdge, GraphStore

BATCH = 2000
EVIDENCE_PER_GROUP = 50  # a triplet group carries at most this many evidence items (`truncated` beyond)
PAIR_BATCH = 500
BYOG = "byog"
EXTRACTED = "extracted"

# Reads project evidence and entities to lists of scalars: the engine serialises and the client parses
# several times less than whole edges and nodes. A missing (null) property reads as absent, as on an edge.
EVIDENCE_KEYS = (
    "rid",
    "chunk_id",
    "raw",
    "canon",
    "context",
    "confidence",
    "temporal",
    "ts",
    "origin",
    "s",
    "t",
    "provider",
)
EVIDENCE = "[" + ", ".join(f"r.{k}" for k in EVIDENCE_KEYS) + "]"
ENTITY_KEYS = ("eid", "name", "type", "namespace")


ENDS = ", ".join("[" + ", ".join(f"{v}.{k}" for k in ENTITY_KEYS) + "]" for v in "ab")  # a's list, b's list


def _props(keys: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    return {k: v for k, v in zip(keys, values, strict=True) if v is not None}


# Visibility of one REL edge `r` for the principals in $tokens (skipped entirely when no `acl` was sent).
# A list comprehension, not any(...): Neptune's openCypher has no any/all/none (adapters/aws/neptune_dialect.py).
REL_VISIBLE = "(r.public OR size([t IN $tokens WHERE r.acl CONTAINS t]) > 0)"


@dataclass(frozen=True)
class Props:
    """An entity or an evidence edge as read for the graph context of a query: its properties only.

    Whole nodes and edges cost the client three more round trips on each read (a new graph handle per
    query resolves label, property and type ids with `db.labels()` and the like); projected scalars none."""

    properties: dict[str, Any]


Triple = tuple[Props, Props, Props]  # source entity, target entity, evidence


def _triple(row: Sequence[Any]) -> Triple:
    a, b, r = row
    return Props(_props(ENTITY_KEYS, a)), Props(_props(ENTITY_KEYS, b)), Props(_props(EVIDENCE_KEYS, r))


@dataclass(frozen=True)
class EntityRow:
    eid: str
    name: str
    type: str
    namespace: str


@dataclass(frozen=True)
class RelationRow:
    source: str  # eid
    target: str
    raw: str
    canonical: str
    context: str
    confidence: float
    temporal: str | None
    chunk_id: str
    origin: str


@dataclass(frozen=True)
class ItemAccess:
    acl: str  # acl_key of the item's readers ("" when none)
    public: bool
    timestamp: float
    provider: str


@dataclass(frozen=True)
class ItemRows:
    """One item's share of the entity graph, as its graph step writes it."""

    item_id: str
    entities: Sequence[EntityRow]
    relations: Sequence[RelationRow]
    access: ItemAccess


def _rel_row(item_id: str, i: int, r: RelationRow, access: ItemAccess) -> dict[str, Any]:
    rid = _rid(item_id, i, r)
    return {
        "s": r.source,
        "t": r.target,
        "rid": rid,
        "props": {
            "rid": rid,
            "item_id": item_id,
            "chunk_id": r.chunk_id,
            "raw": r.raw,
            "canon": r.canonical,
            "context": r.context,
            "confidence": float(r.confidence),
            "temporal": r.temporal,
            "origin": r.origin,
            "ts": access.timestamp,
            "acl": access.acl,
            "public": access.public,
            "provider": access.provider,
            "s": r.source,
            "t": r.target,
        },
    }


def _rid(item_id: str, i: int, r: RelationRow) -> str:
    h = hashlib.sha1(f"{item_id}\x1f{i}\x1f{r.source}\x1f{r.target}\x1f{r.raw}\x1f{r.chunk_id}".encode()).hexdigest()
    return "rel_" + h[:20]


def entity_ref(props: dict[str, Any], provider: str = "") -> dict[str, Any]:
    return {
        "name": props.get("name", ""),
        "type": props.get("type", ""),
        "namespace": props.get("namespace", ""),
        "entity_id": props.get("eid", ""),
        "identifier": None,
        "provider": provider,
    }


def evidence(e: GraphEdge | Props | dict[str, Any], *, epoch: bool) -> dict[str, Any]:
    p = e if isinstance(e, dict) else e.properties
    ts = float(p.get("ts") or 0.0)
    out: dict[str, Any] = {
        "canonical_predicate": p.get("canon", ""),
        "raw_predicate": p.get("raw", ""),
        "context": p.get("context", ""),
        "confidence": float(p.get("confidence") or 0.0),
        "temporal_details": p.get("temporal"),
        "timestamp": ts if epoch else iso(ts),
        "relationship_id": p.get("rid", ""),
        "chunk_id": p.get("chunk_id", ""),
        "source_entity_id": p.get("s", ""),
        "target_entity_id": p.get("t", ""),
    }
    if p.get("origin") == BYOG:
        out["origin"] = BYOG
    return out


class EntityGraph:
    def __init__(self, graph: GraphStore) -> None:
        self._g = graph

    # ---- writes --------------------------------------------------------------------------
    def new_version(self, org: str, graph: str) -> None:
        """Replace the graph's version token: rankings cached under the old one are no longer served.
        Called after (never before) a write's changes, so a reader never caches old data under the new token."""
        self._g.query(
            org, graph, "MERGE (v:GraphVersion {k: 'entity'}) SET v.token = $token", {"token": uuid.uuid4().hex}
        )

    def version(self, org: str, graph: str) -> str | None:
        """The graph's version token (None for a graph no write has versioned yet)."""
        res = self._g.query(org, graph, "MATCH (v:GraphVersion) RETURN v.token LIMIT 1", read_only=True)
        return str(res.rows[0][0]) if res.rows and res.rows[0][0] is not None else None

    def remove_item(self, org: str, graph: str, item_id: str) -> None:
        """Delete an item's evidence and mentions; re-score the pairs it touched, drop entities left alone."""
        try:
            self._remove_items(org, graph, [item_id])
        finally:
            self.new_version(org, graph)

    def _remove_items(self, org: str, graph: str, item_ids: Sequence[str]) -> None:
        res = self._g.query(
            org,
            graph,
            "UNWIND $ids AS id MATCH (a)-[r:REL]->(b) WHERE r.item_id = id RETURN DISTINCT a.eid AS s, b.eid AS t",
            {"ids": list(item_ids)},
            read_only=True,
        )
        pairs = sorted({(str(row[0]), str(row[1])) for row in res.rows})
        mentioned = self._g.query(
            org,
            graph,
            "UNWIND $ids AS id MATCH (s:Source {sid: id}) WITH s MATCH (s)-[:MENTIONS]->(e) RETURN e.eid",
            {"ids": list(item_ids)},
            read_only=True,
        )
        eids = sorted({e for p in pairs for e in p} | {str(row[0]) for row in mentioned.rows})
        if pairs:
            self._g.query(
                org,
                graph,
                "UNWIND $ids AS id MATCH (a)-[r:REL]->(b) WHERE r.item_id = id DELETE r",
                {"ids": list(item_ids)},
            )
            self._rescore(org, graph, pairs)
        if mentioned.rows:
            self._g.query(
                org,
                graph,
                "UNWIND $ids AS id MATCH (s:Source {sid: id}) WITH s MATCH (s)-[m:MENTIONS]->() DELETE m",
                {"ids": list(item_ids)},
            )
        for start in range(0, len(eids), BATCH):
            self._g.query(
                org,
                graph,
                "UNWIND $eids AS eid MATCH (e:Entity {eid: eid}) WHERE NOT (e)--() DELETE e",
                {"eids": eids[start : start + BATCH]},
            )

    def write_item(
        self,
        org: str,
        graph: str,
        item_id: str,
        entities: Sequence[EntityRow],
        relations: Sequence[RelationRow],
        access: ItemAccess,
    ) -> int:
        try:
            return self._write_items(org, graph, [ItemRows(item_id, entities, relations, access)])[0]
        finally:
            self.new_version(org, graph)

    def replace_items(self, org: str, graph: str, items: Sequence[ItemRows]) -> list[int]:
        """remove_item then write_item for each item, in a few round trips for them all (the graph step of
        a batch of graph jobs): the same graph as one by one. Every write is idempotent (MERGE on ids), so a
        batch cut short and run again leaves no duplicates. Answers each item's relation count."""
        try:
            self._remove_items(org, graph, [i.item_id for i in items])
            return self._write_items(org, graph, items)
        finally:
            self.new_version(org, graph)

    def _write_items(self, org: str, graph: str, items: Sequence[ItemRows]) -> list[int]:
        ents: dict[str, EntityRow] = {}
        rels: list[dict[str, Any]] = []
        mentions: list[dict[str, str]] = []
        counts: list[int] = []
        for item in items:
            own = {e.eid: e for e in item.entities}
            for eid, e in own.items():
                ents.setdefault(eid, e)
            item_rels = [_rel_row(item.item_id, i, r, item.access) for i, r in enumerate(item.relations)]
            item_rels = [r for r in item_rels if r["s"] in own and r["t"] in own]
            rels += item_rels
            counts.append(len(item_rels))
            mentions += [{"sid": item.item_id, "eid": eid} for eid in sorted(own)]
        rows = [{"eid": e.eid, "name": e.name, "type": e.type, "namespace": e.namespace} for e in ents.values()]
        for start in range(0, len(rows), BATCH):
            self._g.query(
                org,
                graph,
                "UNWIND $rows AS e MERGE (n:Entity {eid: e.eid}) "
                "ON CREATE SET n.name = e.name, n.type = e.type, n.namespace = e.namespace",
                {"rows": rows[start : start + BATCH]},
            )
        # MERGE on the evidence id, not CREATE: a re-sent batch (a client retry after a lost answer, a
        # retried task) finds its edges instead of adding a second copy of each.
        for start in range(0, len(rels), BATCH):
            self._g.query(
                org,
                graph,
                "UNWIND $rels AS r MATCH (a:Entity {eid: r.s}), (b:Entity {eid: r.t}) "
                "MERGE (a)-[e:REL {rid: r.rid}]->(b) SET e = r.props",
                {"rels": rels[start : start + BATCH]},
            )
        for start in range(0, len(mentions), BATCH):
            self._g.query(
                org,
                graph,
                "UNWIND $rows AS m MATCH (s:Source {sid: m.sid}) MATCH (e:Entity {eid: m.eid}) "
                "MERGE (s)-[:MENTIONS]->(e)",
                {"rows": mentions[start : start + BATCH]},
            )
        self._rescore(org, graph, sorted({(str(r["s"]), str(r["t"])) for r in rels}))
        return counts

    def _rescore(self, org: str, graph: str, pairs: Sequence[Sequence[str]]) -> None:
        """Recompute the GROUP edge of each pair from its evidence (exact, no drift); none left, no group."""
        for start in range(0, len(pairs), PAIR_BATCH):
            batch = [list(p) for p in pairs[start : start + PAIR_BATCH]]
            self._g.query(
                org,
                graph,
                "UNWIND $pairs AS p MATCH (a:Entity {eid: p[0]}), (b:Entity {eid: p[1]}) "
                "OPTIONAL MATCH (a)-[r:REL]->(b) "
                "WITH a, b, sum(r.confidence) AS score, count(r) AS n "
                "MERGE (a)-[g:GROUP]->(b) SET g.score = score, g.n = n",
                {"pairs": batch},
            )
            # Only these pairs can have just dropped to no evidence: a scan of every GROUP edge per write
            # grew with the graph (the graph step of issue 28 slowed as the collection filled).
            self._g.query(
                org,
                graph,
                "UNWIND $pairs AS p MATCH (a:Entity {eid: p[0]})-[g:GROUP]->(b) WHERE b.eid = p[1] AND g.n = 0 "
                "DELETE g",
                {"pairs": batch},
            )

    def set_access(self, org: str, graph: str, item_id: str, access: ItemAccess) -> None:
        try:
            self._g.query(
                org,
                graph,
                "MATCH (a)-[r:REL]->(b) WHERE r.item_id = $id SET r.acl = $acl, r.public = $public",
                {"id": item_id, "acl": access.acl, "public": access.public},
            )
        finally:
            self.new_version(org, graph)

    # ---- relations read ------------------------------------------------------------------
    def ranked_pairs(
        self, org: str, graph: str, *, principals: list[str] | None, offset: int, limit: int
    ) -> tuple[list[tuple[str, str]], int]:
        """One page of (source eid, target eid) pairs, best first, and how many pairs there are in all."""
        if principals is None:
            total_res = self._g.query(org, graph, "MATCH ()-[g:GROUP]->() RETURN count(g)", read_only=True)
            total = int(total_res.rows[0][0]) if total_res.rows else 0
            res = self._g.query(
                org,
                graph,
                "MATCH (a)-[g:GROUP]->(b) WITH a.eid AS s, b.eid AS t, g.score AS score "
                "ORDER BY score DESC, s, t SKIP $offset LIMIT $limit RETURN collect([s, t]) AS page",
                {"offset": offset, "limit": limit},
                read_only=True,
            )
        else:
            res = self._g.query(
                org,
                graph,
                f"MATCH (a)-[r:REL]->(b) WHERE {REL_VISIBLE} "
                "WITH a.eid AS s, b.eid AS t, sum(r.confidence) AS score ORDER BY score DESC, s, t "
                "WITH collect([s, t]) AS all RETURN all[$offset..$end] AS page, size(all) AS total",
                {"tokens": principal_tokens(principals), "offset": offset, "end": offset + limit},
                read_only=True,
            )
            total = int(res.rows[0][1]) if res.rows else 0
        page = res.rows[0][0] if res.rows else []
        return [(str(p[0]), str(p[1])) for p in page or []], total

    def groups(
        self, org: str, graph: str, pairs: Sequence[tuple[str, str]], *, principals: list[str] | None, epoch: bool
    ) -> list[dict[str, Any]]:
        """Triplet groups for these pairs, in the same order, with their visible evidence (best first)."""
        out: list[dict[str, Any]] = []
        vis = f"WHERE {REL_VISIBLE} " if principals is not None else ""
        for start in range(0, len(pairs), PAIR_BATCH):
            batch = [[s, t, start + i] for i, (s, t) in enumerate(pairs[start : start + PAIR_BATCH])]
            res = self._g.query(
                org,
                graph,
                "UNWIND $pairs AS p MATCH (a:Entity {eid: p[0]}), (b:Entity {eid: p[1]}) "
                f"MATCH (a)-[r:REL]->(b) {vis}"
                "WITH p, a, b, r ORDER BY r.confidence DESC, r.rid "
                f"WITH p, a, b, collect({EVIDENCE}) AS rs "
                f"RETURN p[2] AS i, {ENDS}, size(rs) AS n, rs[0..$cap] AS ev ORDER BY i",
                {"pairs": batch, "cap": EVIDENCE_PER_GROUP, "tokens": principal_tokens(principals or [])},
                read_only=True,
            )
            for _, a, b, n, ev in res.rows:
                out.append(self._group(a, b, ev, int(n), epoch=epoch))
        return out

    @staticmethod
    def _group(a: list[Any], b: list[Any], rows: list[list[Any]], n: int, *, epoch: bool) -> dict[str, Any]:
        """A triplet group from projected entities (ENTITY_KEYS) and evidence rows (EVIDENCE_KEYS)."""
        ev = [_props(EVIDENCE_KEYS, row) for row in rows]
        provider = str(ev[0].get("provider") or "") if ev else ""
        group: dict[str, Any] = {
            "source": entity_ref(_props(ENTITY_KEYS, a), provider),
            "target": entity_ref(_props(ENTITY_KEYS, b), provider),
            "relations": [evidence(e, epoch=epoch) for e in ev],
            "chunk_id": str(ev[0].get("chunk_id") or "") if ev else "",
        }
        if n > len(ev):
            group["truncated"] = True
        return group

    def item_groups(self, org: str, graph: str, item_id: str, *, principals: list[str] | None) -> list[dict[str, Any]]:
        """Every triplet group of one item's evidence, ranked by summed confidence."""
        vis = f" AND {REL_VISIBLE}" if principals is not None else ""
        res = self._g.query(
            org,
            graph,
            f"MATCH (a)-[r:REL]->(b) WHERE r.item_id = $id{vis} "
            "WITH a, b, r ORDER BY r.confidence DESC, r.rid "
            f"WITH a, b, collect({EVIDENCE}) AS rs, sum(r.confidence) AS score "
            f"RETURN {ENDS}, size(rs) AS n, rs[0..$cap] AS ev, score "
            "ORDER BY score DESC, a.eid, b.eid",
            {"id": item_id, "cap": EVIDENCE_PER_GROUP, "tokens": principal_tokens(principals or [])},
            read_only=True,
        )
        return [self._group(a, b, ev, int(n), epoch=False) for a, b, n, ev, _ in res.rows]

    def mentions(self, org: str, graph: str, item_ids: Sequence[str], cap: int) -> list[tuple[str, dict[str, Any]]]:
        """(item id, entity properties) for the entities these items mention, at most `cap`."""
        res = self._g.query(
            org,
            graph,
            "UNWIND $ids AS id MATCH (s:Source {sid: id}) WITH id, s MATCH (s)-[:MENTIONS]->(e) "
            "RETURN id, e ORDER BY id, e.eid LIMIT $cap",
            {"ids": list(item_ids), "cap": cap},
            read_only=True,
        )
        return [(str(i), e.properties) for i, e in res.rows]

    # ---- query graph context -------------------------------------------------------------
    def chunk_edges(self, org: str, graphs: Sequence[str], chunk_ids: Sequence[str], cap: int) -> list[list[Triple]]:
        """The relations these chunks carry, in each of `graphs` (one read of them all: GraphStore.read_many)."""
        cypher = (
            f"UNWIND $cids AS cid MATCH (a)-[r:REL]->(b) WHERE r.chunk_id = cid RETURN {ENDS}, {EVIDENCE} LIMIT $cap"
        )
        params = {"cids": list(chunk_ids), "cap": cap}
        results = self._g.read_many(org, [(graph, cypher, params) for graph in graphs])
        return [[_triple(row) for row in res.rows] for res in results]

    def neighbour_edges(self, org: str, eids_of: Sequence[tuple[str, Sequence[str]]], cap: int) -> list[list[Triple]]:
        """The best-scored groups around each graph's entities (graph, entity ids), with their evidence."""
        cypher = (
            "UNWIND $eids AS eid MATCH (x:Entity {eid: eid}) MATCH (x)-[g:GROUP]-(y) "
            "WITH DISTINCT startNode(g) AS a, endNode(g) AS b, g ORDER BY g.score DESC LIMIT $cap "
            f"MATCH (a)-[r:REL]->(b) RETURN {ENDS}, {EVIDENCE}"
        )
        reads = [(graph, cypher, {"eids": list(eids), "cap": cap}) for graph, eids in eids_of]
        return [[_triple(row) for row in res.rows] for res in self._g.read_many(org, reads)]
