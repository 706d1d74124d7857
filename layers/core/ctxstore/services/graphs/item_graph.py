"""The item graph of one scope: one `(:Source)` node per item, its links, and the breadth-first subgraph.

A source carries `thread_id` and `parent_id` as properties (both indexed), explicit
`relates_to` links are `[:LINKS {relation}]` edges. A link to an item that is not
ingested (yet) points at a `ghost` node, which the walk never returns; ingesting that
item later fills the node in, so links declared in either order connect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.domain.graph_keys import SOURCE_TYPE, principal_tokens
from ctxstore.ports.graph import GraphStore

# Visibility of a source node `n` for the principals in $tokens ($all: no `acl` was sent). A list
# comprehension, not any(...): Neptune's openCypher has no any/all/none (adapters/aws/neptune_dialect.py).
NODE_VISIBLE = "($all OR n.public OR size([t IN $tokens WHERE n.acl CONTAINS t]) > 0)"
EXPANSION_CAP = 1000  # neighbours fetched per kind of link per level; hitting it marks the answer truncated
RELATION_ORDER = {"link": 0, "parent": 1, "child": 2, "same_thread": 3}


@dataclass(frozen=True)
class SourceProps:
    item_id: str
    title: str
    kind: str
    provider: str
    external_id: str
    thread_id: str | None
    parent_id: str | None
    acl: str
    public: bool
    timestamp: float


def _source_row(s: SourceProps) -> dict[str, Any]:
    return {
        "sid": s.item_id,
        "title": s.title,
        "kind": s.kind,
        "provider": s.provider,
        "external_id": s.external_id,
        "thread_id": s.thread_id,
        "parent_id": s.parent_id,
        "acl": s.acl,
        "public": s.public,
        "ts": s.timestamp,
    }


# A member is read as a list of scalars, not a node: the engine serialises and the client parses
# far less (a whole node costs several times more per row).
MEMBER_KEYS = ("sid", "title", "kind", "provider", "external_id", "thread_id", "parent_id", "ts")
MEMBER = "[" + ", ".join(f"n.{k}" for k in MEMBER_KEYS) + "]"


def _branches(extra: str, ret: str) -> str:
    """The five ways to a neighbour of the frontier in $ids, as one UNION ALL: `extra` is added to each
    neighbour filter, `ret` (with {rel} and {kind} slots) ends each branch.

    Thread and parent values come in as parameters (pairs [from id, value]): an index seek on a
    property of a bound node (`{thread_id: s.thread_id}`) is not used by the engine and scans.
    """
    base = "UNWIND $ids AS id MATCH (s:Source {sid: id}) WITH id, s MATCH (s)"  # WITH: start from s
    ok = f"NOT n.ghost AND {NODE_VISIBLE}{extra}"
    return " UNION ALL ".join(
        [
            base + f"-[l:LINKS]->(n) WHERE {ok} " + ret.format(rel="l.relation", kind="'link'"),
            base + f"<-[l:LINKS]-(n) WHERE {ok} " + ret.format(rel="l.relation", kind="'link'"),
            "UNWIND $parents AS p WITH p[0] AS id, p[1] AS parent MATCH (n:Source {sid: parent}) "
            + f"WHERE {ok} "
            + ret.format(rel="'parent'", kind="'parent'"),
            f"UNWIND $ids AS id MATCH (n:Source {{parent_id: id}}) WHERE {ok} "
            + ret.format(rel="'child'", kind="'child'"),
            "UNWIND $threads AS p WITH p[0] AS id, p[1] AS thread MATCH (n:Source {thread_id: thread}) "
            + f"WHERE n.sid <> id AND {ok} "
            + ret.format(rel="'same_thread'", kind="'same_thread'"),
        ]
    )


NEIGHBOURS = _branches("", f"RETURN id AS src, {MEMBER} AS node, {{rel}} AS rel, {{kind}} AS kind LIMIT $cap")
# Whether the frontier still reaches a visible source outside $known (at most one row per branch).
REACHES_BEYOND = _branches(" AND NOT n.sid IN $known", "RETURN 1 AS found LIMIT 1")


def source_entity(member: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": member.get("title") or member["source_id"],
        "type": SOURCE_TYPE,
        "namespace": "",
        "entity_id": member["source_id"],
        "identifier": member["source_id"],
        "provider": member.get("app_provider") or "",
    }


def structural_evidence(predicate: str, source_id: str, target_id: str, ts: float) -> dict[str, Any]:
    return {
        "canonical_predicate": predicate,
        "raw_predicate": predicate,
        "context": "",
        "confidence": 1.0,
        "temporal_details": None,
        "timestamp": ts,
        "relationship_id": "",
        "chunk_id": "",
        "source_entity_id": source_id,
        "target_entity_id": target_id,
    }


class ItemGraph:
    def __init__(self, graph: GraphStore) -> None:
        self._g = graph

    # ---- writes --------------------------------------------------------------------------
    def upsert_source(self, org: str, graph: str, s: SourceProps, links: Sequence[tuple[str, str]]) -> None:
        """The item's node with its current properties; its outgoing links replaced by `links`."""
        self.upsert_sources(org, graph, [(s, links)])

    def upsert_sources(
        self, org: str, graph: str, sources: Sequence[tuple[SourceProps, Sequence[tuple[str, str]]]]
    ) -> None:
        """upsert_source for several items in two round trips (a batch of graph jobs)."""
        self._g.query(
            org,
            graph,
            "UNWIND $rows AS r MERGE (s:Source {sid: r.sid}) "
            "SET s.ghost = false, s.title = r.title, s.kind = r.kind, s.provider = r.provider, "
            "s.external_id = r.external_id, s.thread_id = r.thread_id, s.parent_id = r.parent_id, "
            "s.acl = r.acl, s.public = r.public, s.ts = r.ts "
            "WITH s OPTIONAL MATCH (s)-[l:LINKS]->() DELETE l",
            {"rows": [_source_row(s) for s, _ in sources]},
        )
        rows = [
            {"sid": s.item_id, "id": target, "relation": relation}
            for s, links in sources
            for target, relation in links
            if target != s.item_id
        ]
        if rows:  # MERGE, not CREATE: a re-sent query (a retry after a lost answer) adds no second link
            self._g.query(
                org,
                graph,
                "UNWIND $links AS l MATCH (s:Source {sid: l.sid}) "
                "MERGE (t:Source {sid: l.id}) ON CREATE SET t.ghost = true, t.public = false, t.acl = '' "
                "MERGE (s)-[:LINKS {relation: l.relation}]->(t)",
                {"links": rows},
            )

    def set_access(self, org: str, graph: str, item_id: str, acl: str, public: bool) -> None:
        self._g.query(
            org,
            graph,
            "MATCH (s:Source {sid: $sid}) WHERE NOT s.ghost SET s.acl = $acl, s.public = $public",
            {"sid": item_id, "acl": acl, "public": public},
        )

    def remove_source(self, org: str, graph: str, item_id: str) -> None:
        """Drop the item's node and outgoing edges; a node other items still link to stays as a ghost."""
        self._g.query(
            org,
            graph,
            "MATCH (s:Source {sid: $sid}) OPTIONAL MATCH (s)-[l]->() DELETE l",
            {"sid": item_id},
        )
        res = self._g.query(
            org,
            graph,
            "MATCH (s:Source {sid: $sid}) OPTIONAL MATCH (x)-[:LINKS]->(s) RETURN count(x)",
            {"sid": item_id},
            read_only=True,
        )
        inbound = int(res.rows[0][0]) if res.rows else 0
        if inbound:
            self._g.query(
                org,
                graph,
                "MATCH (s:Source {sid: $sid}) SET s.ghost = true, s.public = false, s.acl = '', "
                "s.thread_id = null, s.parent_id = null, s.title = null",
                {"sid": item_id},
            )
        else:
            self._g.query(org, graph, "MATCH (s:Source {sid: $sid}) DELETE s", {"sid": item_id})

    # ---- subgraph ------------------------------------------------------------------------
    def start(self, org: str, graph: str, item_id: str, principals: list[str] | None) -> dict[str, Any] | None:
        res = self._g.query(
            org,
            graph,
            f"MATCH (n:Source {{sid: $sid}}) WHERE NOT n.ghost AND {NODE_VISIBLE} RETURN {MEMBER}",
            {"sid": item_id, **_acl_params(principals)},
            read_only=True,
        )
        return _member_props(res.rows[0][0]) if res.rows else None

    def neighbours(
        self,
        org: str,
        graph: str,
        frontier: dict[str, dict[str, Any]],
        principals: list[str] | None,
        threads_seen: set[str] | None = None,
    ) -> tuple[list[tuple[str, dict[str, Any], str, str]], bool]:
        """(from id, neighbour properties, relation, kind) for a frontier (id -> its properties, in
        frontier order), and whether a fetch cap was hit.

        A thread is walked once, from the first frontier node in it: the members of a thread are the
        same whoever asks, so later askers would only rediscover them. `threads_seen` carries that
        across calls of one walk (and is updated).
        """
        seen = threads_seen if threads_seen is not None else set()
        threads: list[list[str]] = []
        for i, p in frontier.items():
            t = p.get("thread_id")
            if t and t not in seen:
                seen.add(str(t))
                threads.append([i, str(t)])
        params = {
            "ids": list(frontier),
            "parents": [[i, p["parent_id"]] for i, p in frontier.items() if p.get("parent_id")],
            "threads": threads,
            "cap": EXPANSION_CAP,
            **_acl_params(principals),
        }
        res = self._g.query(org, graph, NEIGHBOURS, params, read_only=True)
        counts: dict[str, int] = {}
        out = []
        for src, node, rel, kind in res.rows:
            counts[kind] = counts.get(kind, 0) + 1
            out.append((str(src), _member_props(node), str(rel), str(kind)))
        # a kind of link is fetched by two branches at most (links in and out), each capped
        return out, any(n >= EXPANSION_CAP for n in counts.values())

    def reaches_beyond(
        self,
        org: str,
        graph: str,
        frontier: dict[str, dict[str, Any]],
        known: Sequence[str],
        principals: list[str] | None,
    ) -> bool:
        """Whether a source of the frontier has a visible neighbour outside `known`."""
        params = {
            "ids": list(frontier),
            "parents": [[i, p["parent_id"]] for i, p in frontier.items() if p.get("parent_id")],
            "threads": [[i, p["thread_id"]] for i, p in frontier.items() if p.get("thread_id")],
            "known": list(known),
            **_acl_params(principals),
        }
        return bool(self._g.query(org, graph, REACHES_BEYOND, params, read_only=True).rows)

    def links_among(self, org: str, graph: str, ids: Sequence[str]) -> list[tuple[str, str, str]]:
        res = self._g.query(
            org,
            graph,
            "UNWIND $ids AS id MATCH (a:Source {sid: id}) WITH a MATCH (a)-[l:LINKS]->(b) WHERE b.sid IN $ids "
            "RETURN a.sid, b.sid, l.relation",
            {"ids": list(ids)},
            read_only=True,
        )
        return [(str(a), str(b), str(r)) for a, b, r in res.rows]


def _member_props(values: list[Any]) -> dict[str, Any]:
    return dict(zip(MEMBER_KEYS, values, strict=True))


def _acl_params(principals: list[str] | None) -> dict[str, Any]:
    return {"all": principals is None, "tokens": principal_tokens(principals or [])}
