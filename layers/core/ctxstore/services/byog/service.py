"""BYOG: hosted openCypher graphs. One isolated graph per (organisation, database, collection).

Databases are records of their own kind (not core databases) and are ready at once.
Collections are graphs in the GraphStore, created by the engine on first write.
Queries are screened on tokens before they run (`cypher_screen`), reads go to the
engine as read-only queries with the read budget, writes with the write budget, and
the rows come back in the spec's flat shapes.

Plain `DELETE` of a node that still has relationships: openCypher raises an error,
the engine silently deletes the relationships too. Before a write whose first plain
`DELETE` follows a read-only part, the service runs that read-only part once more as
a probe and answers 400 without writing anything if a node to delete would keep a
relationship that the same clause does not delete. A plain `DELETE` after other writes
in the same query, or nested in FOREACH or a subquery, cannot be probed and keeps the
engine's behaviour (documented in docs/byog.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from ctxstore.config import ByogSettings
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.scopes import validate_database_name
from ctxstore.ports.clock import Clock
from ctxstore.ports.graph import GraphEdge, GraphNode, GraphPath, GraphQueryError, GraphStore, GraphTimeout
from ctxstore.ports.records import ConditionFailed, Put, Record, RecordStore
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.byog.answers import (
    ByogCollectionDeleted,
    ByogCollections,
    ByogDatabaseCreated,
    ByogDatabaseDeleted,
)
from ctxstore.services.byog.cypher_screen import QueryRejected, delete_probe, screen

MAX_BODY_BYTES = 256 * 1024
RESERVED = ("id", "labels", "relation", "source_node_id", "target_node_id")
GRAPH_PREFIX = "byog:"
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
# openCypher parameter names: a symbolic name or a decimal integer (`$1`)
_PARAM_NAME = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)$")
MAX_PARAM_DEPTH = 32

# A deployment whose graph store does not host BYOG (AWS: BYOG needs a graph per collection, which the stack does
# not create) refuses with 403 FORBIDDEN, the spec's "a plan/account limit prevents the operation": not retryable.
NOT_HOSTED = (
    "BYOG is not available for '{what}' on this deployment: user openCypher cannot share the stack's graph safely, "
    "so each BYOG collection needs a graph of its own and none is provisioned for it. Use BYOG on the local server "
    "(`ctxstore serve`, docs/byog.md), or have the operator create a Neptune Analytics graph for it and map it in "
    "CTXSTORE_BYOG_GRAPH_IDS (docs/aws.md, BYOG)"
)

TIMEOUT_ADVICE = (
    "the query exceeded the {kind} execution budget of {secs:g} s and was stopped (a write is rolled back); "
    "add a LIMIT, create an index for the property you filter on (CREATE INDEX FOR (n:Label) ON (n.prop)), "
    "or split it into simpler queries"
)


def validate_collection(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise invalid("'collection' is required and must be a non-empty string")
    if not _COLLECTION.match(name):
        raise invalid(
            "'collection' must be 1-64 characters of letters, digits, '_' or '-', starting with a letter or digit"
        )
    return name


def graph_name(database: str, collection: str) -> str:
    return f"{GRAPH_PREFIX}{database}:{collection}"


class ByogService:
    def __init__(
        self,
        records: RecordStore,
        clock: Clock,
        graph: Callable[[], GraphStore] | None,
        settings: ByogSettings | None = None,
        *,
        hosted: frozenset[str] | None = None,
    ) -> None:
        """`graph`: a provider (the engine starts, or its client is built, on the first BYOG call); None on a
        deployment without a graph store (AWS with GraphStore=none).
        `hosted`: the BYOG collections the graph store hosts (None: every one), as the composition root set."""
        self._records = records
        self._clock = clock
        self._graph_port = graph
        o = settings or ByogSettings()
        self.cluster = o.cluster_name
        self.max_rows = o.max_rows
        self.read_timeout_ms = o.read_timeout_ms
        self.write_timeout_ms = o.write_timeout_ms
        self._hosted = hosted

    @property
    def _graph(self) -> GraphStore:
        if self._graph_port is None:
            raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "the graph engine is not configured on this deployment")
        return self._graph_port()

    def _check_hosted(self, org: str, database: str, collection: str | None = None) -> None:
        """Refuse (403) a database or collection this deployment's graph store cannot host for BYOG."""
        hosted = self._hosted
        if hosted is None:
            return
        if collection is not None:
            ok = f"{org}/{graph_name(database, collection)}" in hosted
        else:
            prefix = f"{org}/{GRAPH_PREFIX}{database}:"
            ok = any(key.startswith(prefix) for key in hosted)
        if not ok or self._graph_port is None:
            what = database if collection is None else f"{database}/{collection}"
            raise ApiError(ErrorCode.FORBIDDEN, NOT_HOSTED.format(what=what))

    # ---- databases ---------------------------------------------------------------------
    def _require(self, principal: Principal, database: object) -> tuple[str, Record]:
        name = validate_database_name(database)
        self._check_hosted(principal.org, name)
        rec = self._records.get(principal.org, rk.BYOG_DATABASE, "", name)
        if rec is None:
            raise ApiError(ErrorCode.DATABASE_NOT_FOUND, f"Database '{name}' not found")
        principal.check_database(name)
        return name, rec

    def create_database(self, principal: Principal, database: object) -> ByogDatabaseCreated:
        name = validate_database_name(database)
        principal.check_database(name)
        self._check_hosted(principal.org, name)
        data = {"database": name, "cluster": self.cluster, "created_at": self._clock.now()}
        try:
            self._records.put(principal.org, Put(rk.BYOG_DATABASE, "", name, data, if_absent=True))
        except ConditionFailed:
            raise ApiError(ErrorCode.DATABASE_ALREADY_EXISTS, f"Database '{name}' already exists") from None
        return {"database": name, "status": "ready", "cluster": self.cluster}

    def list_databases(self, principal: Principal) -> list[str]:
        """The organisation's BYOG databases that this key may use (the console lists them; no route does)."""
        names: list[str] = []
        after: str | None = None
        while True:
            page = self._records.query(principal.org, rk.BYOG_DATABASE, "", after=after, limit=1000)
            names.extend(r.sk for r in page.records if principal.databases is None or r.sk in principal.databases)
            if page.next_after is None:
                return names
            after = page.next_after

    def _collections(self, principal: Principal, database: str) -> list[str]:
        prefix = f"{GRAPH_PREFIX}{database}:"
        return [g[len(prefix) :] for g in self._graph.list_graphs(principal.org, prefix)]

    def list_collections(self, principal: Principal, database: object) -> ByogCollections:
        name, _ = self._require(principal, database)
        return {"database": name, "collections": self._collections(principal, name)}

    def delete_collection(self, principal: Principal, database: object, collection: object) -> ByogCollectionDeleted:
        name, _ = self._require(principal, database)
        col = validate_collection(collection)
        self._check_hosted(principal.org, name, col)
        self._graph.drop(principal.org, graph_name(name, col))
        return {"database": name, "collection": col, "deleted": True}

    def delete_database(self, principal: Principal, database: object) -> ByogDatabaseDeleted:
        name, rec = self._require(principal, database)
        # Graphs first, record last: a crash in between leaves the database listed, and deleting again finishes.
        cols = self._collections(principal, name)
        for col in cols:
            self._graph.drop(principal.org, graph_name(name, col))
        self._records.delete(principal.org, rk.BYOG_DATABASE, "", name)
        return {
            "database": name,
            "cluster": rec.data.get("cluster", self.cluster),
            "deleted": True,
            "deleted_collections": cols,
        }

    # ---- queries -----------------------------------------------------------------------
    def query(
        self, principal: Principal, database: object, collection: object, query: object, params: object
    ) -> list[dict[str, Any]]:
        name, _ = self._require(principal, database)
        col = validate_collection(collection)
        self._check_hosted(principal.org, name, col)
        if not isinstance(query, str) or not query.strip():
            raise invalid("'query' is required and must be a non-empty openCypher string")
        clean_params = _check_params(params)
        try:
            screened = screen(query)
        except QueryRejected as exc:
            raise invalid(str(exc)) from None
        missing = sorted(screened.params_used - set(clean_params))
        if missing:
            raise invalid(f"the query uses ${missing[0]} but 'params' has no '{missing[0]}'")
        graph = graph_name(name, col)
        budget = self.write_timeout_ms if screened.is_write else self.read_timeout_ms
        kind = "write" if screened.is_write else "read"
        try:
            if screened.delete_check is not None:
                self._check_delete(principal.org, graph, delete_probe(screened.delete_check), clean_params, budget)
            result = self._graph.query(
                principal.org,
                graph,
                screened.query,
                clean_params or None,
                read_only=not screened.is_write,
                timeout_ms=budget,
            )
        except GraphTimeout:
            raise invalid(TIMEOUT_ADVICE.format(kind=kind, secs=budget / 1000)) from None
        except GraphQueryError as exc:
            msg = str(exc)
            if not screened.is_write and _missing_graph(msg):
                return []  # reading a collection nobody has written to yet
            raise invalid(f"the query failed: {msg}") from None
        columns = result.columns
        rows = result.rows[: self.max_rows] if self.max_rows > 0 else result.rows
        return [{col_name: to_json(v) for col_name, v in zip(columns, row, strict=False)} for row in rows]

    def _check_delete(self, org: str, graph: str, probe: str, params: dict[str, Any], budget: int) -> None:
        try:
            res = self._graph.query(org, graph, probe, params or None, read_only=True, timeout_ms=budget)
        except GraphQueryError:
            return  # the probe could not be formed for this query; the engine judges the query itself
        if res.rows:
            node_id = res.rows[0][0]
            raise invalid(
                f"cannot delete node {node_id} because it still has relationships; delete its relationships "
                "in the same query first, or use DETACH DELETE to remove the node with its relationships"
            )


def _missing_graph(msg: str) -> bool:
    low = msg.lower()
    return "empty key" in low or "invalid graph operation" in low or "graph does not exist" in low


def _check_params(params: object) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise invalid("'params' must be an object mapping parameter names to values")
    for key, value in params.items():
        if not isinstance(key, str) or not _PARAM_NAME.match(key):
            raise invalid(
                f"parameter name {key!r} must be letters, digits and '_' not starting with a digit, or only digits"
            )
        _check_value(value, f"params.{key}", 0)
    return dict(params)


def _check_value(v: Any, where: str, depth: int) -> None:
    # Hot for bulk writes (an UNWIND batch is thousands of values): exact-type checks, strings first.
    t = type(v)
    if t is str or t is bool or v is None:
        return
    if t is int:
        if not -(2**63) <= v < 2**63:
            raise invalid(f"'{where}' is outside the 64-bit integer range")
        return
    if t is float:
        if not math.isfinite(v):
            raise invalid(f"'{where}' must be a finite number")
        return
    if depth >= MAX_PARAM_DEPTH:
        raise invalid(f"'{where}' is nested too deeply")
    if t is list:
        for i, x in enumerate(v):
            if type(x) is not str:
                _check_value(x, f"{where}[{i}]", depth + 1)
        return
    if t is dict:
        for k, x in v.items():
            if type(k) is not str or not k or "`" in k:
                raise invalid(f"'{where}' has a key that is empty or contains a backtick")
            if type(x) is not str:
                _check_value(x, f"{where}.{k}", depth + 1)
        return
    raise invalid(f"'{where}' has an unsupported type")


def _props(p: dict[str, Any]) -> dict[str, Any]:
    return {k: to_json(v) for k, v in p.items() if k not in RESERVED}


def to_json(v: Any) -> Any:
    """One engine value in the spec's row shape (BYOG values)."""
    if isinstance(v, GraphNode):
        return {**_props(v.properties), "id": v.id, "labels": list(v.labels)}
    if isinstance(v, GraphEdge):
        return {
            **_props(v.properties),
            "id": v.id,
            "relation": v.relation,
            "source_node_id": v.source_node_id,
            "target_node_id": v.target_node_id,
        }
    if isinstance(v, GraphPath):
        return {"nodes": [to_json(n) for n in v.nodes], "edges": [to_json(e) for e in v.edges]}
    if isinstance(v, list):
        return [to_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v
