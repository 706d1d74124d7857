"""GraphStore on Neptune Analytics (boto3 ``neptune-graph`` ExecuteQuery, openCypher).

Neptune Analytics holds one graph per resource, while the port promises many named, isolated graphs.
The two kinds of callers are treated differently:

* **Entity and item graphs** (names ``ctx:<store>:<database>:<collection>``, written and read only by
  ctxstore's own fixed queries) share the deployment's graph through a label namespace: every label
  and relationship type in the query is rewritten to ``<ns>__<name>`` and every labelled node pattern
  also gets the marker label ``<ns>`` (``ns`` = a hash of org and graph name). Each pattern part of a
  MATCH/MERGE/CREATE must name a label or a relationship type, so every match is anchored inside the
  namespace; a query that cannot be namespaced is refused, never run unscoped. ``labels()``/``type()``
  are refused (they would show the prefix); results are stripped of it.
* **BYOG collections** run arbitrary user Cypher (``MATCH (n) RETURN n`` must not see other tenants),
  so no rewriting makes a shared graph safe for them: each one needs its own Neptune Analytics graph,
  mapped in ``byog_graphs`` (``"<org>/<graph name>" -> graph id``). An unmapped BYOG collection answers
  StoreUnavailable (503), not someone else's data.

Neptune indexes every property itself, so ``CREATE INDEX`` statements are accepted as no-ops.

**Dialect.** Neptune's openCypher lacks some of what FalkorDB accepts (``neptune_dialect``): integer
parameters of SKIP/LIMIT are written into the text before sending, and BYOG user Cypher with a
construct Neptune documents as unsupported is refused here with the reason (GraphQueryError).

**Timeouts and retries.** Every ExecuteQuery carries ``queryTimeoutMilliseconds`` (the caller's, else
``timeout_default_ms`` for reads and ``timeout_max_ms`` for writes, never above ``timeout_max_ms``), and
the read timeout of the client that sends it is ``CLIENT_GRACE_S`` above that query timeout's class
(``timeout_default_ms`` or ``timeout_max_ms``): the server has ended a query before the client stops
waiting for it, so botocore only re-sends a call whose answer was lost. Such a
re-send is safe because ctxstore's writes are idempotent (MERGE on stable keys, SET, DELETE); botocore's
standard retries stay on for throttling and 5xx. Throttling, 5xx, conflicts, exhausted retries of
timeouts or connections and Neptune's resource limits answer StoreUnavailable (503, retryable).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws._common import error_code, http_status
from ctxstore.adapters.aws.neptune_dialect import check, inline_skip_limit
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.graph import (
    GraphEdge,
    GraphNode,
    GraphPath,
    GraphQueryError,
    GraphRead,
    GraphResult,
    GraphTimeout,
)

SHARED_PREFIX = "ctx:"  # entity/item graphs (domain.graph_keys.GRAPH_PREFIX)
REGISTRY_LABEL = "ctxstore_graph"  # one node per namespace in use: list_graphs/drop
DROP_BATCH = 10_000
CLIENT_GRACE_S = 5.0  # the client's read timeout exceeds the longest query timeout sent by this much
# Reads of several graphs for one answer at once (read_many).
_READS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ctxstore-neptune-read")

_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*|/\*.*?\*/)
      |(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      |(?P<bt>`(?:[^`]|``)*`)
      |(?P<param>\$\w+)
      |(?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
      |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<op>\S)""",
    re.VERBOSE | re.DOTALL,
)
_PATTERN_CLAUSES = {"MATCH", "MERGE", "CREATE"}
_CLAUSE_END = {
    "WHERE", "WITH", "RETURN", "SET", "DELETE", "DETACH", "REMOVE", "UNWIND", "MATCH", "OPTIONAL",
    "MERGE", "CREATE", "ON", "CALL", "UNION", "ORDER", "SKIP", "LIMIT", "FOREACH", "YIELD",
}  # fmt: skip
_WRITES = {"CREATE", "MERGE", "SET", "DELETE", "REMOVE", "DETACH", "DROP", "FOREACH"}
_REFUSED_FUNCTIONS = {"LABELS", "TYPE"}
_TRANSIENT = {"ThrottlingException", "InternalServerException", "ConflictException"}
_LIMITS = {"INTERNAL_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "STORAGE_LIMIT_EXCEEDED", "PARTITION_FULL"}


def namespace(org: str, graph: str) -> str:
    return "g" + hashlib.sha256(f"{org}\x1f{graph}".encode()).hexdigest()[:20]


def _tokens(query: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup or "op"
        out.append((kind, m.group()))
    if "".join(t for _, t in out) != query or any(k == "op" and t in "'\"`" for k, t in out):
        raise GraphQueryError("the query could not be tokenised (unterminated string or comment?)")
    return out


def _name(kind: str, text: str) -> str:
    return text[1:-1].replace("``", "`") if kind == "bt" else text


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def is_index_statement(query: str) -> bool:
    words = [t.upper() for k, t in _tokens(query) if k == "id"][:3]
    return words[:2] == ["CREATE", "INDEX"] or words[:3] in (["CREATE", "RANGE", "INDEX"], ["DROP", "INDEX", "ON"])


def is_write(query: str) -> bool:
    return any(k == "id" and t.upper() in _WRITES for k, t in _tokens(query))


def namespace_query(query: str, ns: str) -> str:
    """The query with its labels and relationship types moved into namespace `ns` (see the module doc).

    A MATCH/MERGE/CREATE pattern part is anchored when it names a label or relationship type, or starts
    from a node variable an anchored part bound earlier (edges never cross namespaces, so every hop from
    a namespaced node stays inside). Anything else would read or write outside the namespace: refused.
    """
    return _Namespacer(query, ns).run()


class _Namespacer:
    """One pass over the query's significant tokens, rewriting labels and types in `out`."""

    def __init__(self, query: str, ns: str) -> None:
        self.ns = ns
        self.toks = _tokens(query)
        self.sig = [i for i, (k, _) in enumerate(self.toks) if k != "ws"]  # indexes of significant tokens
        self.out = [t for _, t in self.toks]
        self.brace = 0
        self.rel_bracket = False
        self.node_paren: list[int] = []  # stack: index in `out` of the last label of the current node pattern, or -1
        self.clause: str | None = None
        self.anchored = True
        self.part_vars: set[str] = set()
        self.bound: set[str] = set()

    def run(self) -> str:
        for pos in range(len(self.sig)):
            self._step(pos)
        self._end_part()
        return "".join(self.out)

    def _tok(self, pos: int) -> tuple[str, str]:
        return self.toks[self.sig[pos]] if 0 <= pos < len(self.sig) else ("", "")

    def _end_part(self) -> None:
        if self.clause in _PATTERN_CLAUSES:
            if not self.anchored and not self.part_vars & self.bound:
                raise GraphQueryError(f"every {self.clause} pattern must name a label or relationship type")
            self.bound.update(self.part_vars)
        self.part_vars.clear()
        self.anchored = False

    def _step(self, pos: int) -> None:
        kind, text = self._tok(pos)
        prev, nxt = self._tok(pos - 1), self._tok(pos + 1)
        upper = text.upper() if kind == "id" else ""
        if kind == "id" and upper in _REFUSED_FUNCTIONS and nxt[1] == "(":
            raise GraphQueryError(f"{text}() is not available on a namespaced graph")
        if kind == "id" and prev[1].upper() == "ON" and upper in ("CREATE", "MATCH"):
            return  # MERGE ... ON CREATE SET / ON MATCH SET
        at_top = self.brace == 0 and not self.rel_bracket and not self.node_paren
        if kind == "id" and at_top and upper in _CLAUSE_END:
            self._end_part()
            self.clause = upper if upper in _PATTERN_CLAUSES else None
            return
        if kind in ("id", "bt") and prev[1] == "(" and self.brace == 0 and nxt[1] in (":", ")", "{"):
            self.part_vars.add(_name(kind, text))  # a node variable
        if self._bracket(text, prev[1]):
            return
        if text == "," and at_top and self.clause in _PATTERN_CLAUSES:
            self._end_part()
        elif (text == ":" or (text == "|" and self.rel_bracket)) and nxt[0] in ("id", "bt"):
            self._label(pos, prev)

    def _bracket(self, text: str, prev: str) -> bool:
        """Track braces, relationship brackets and node parentheses; True if `text` was one."""
        if text == "{":
            self.brace += 1
        elif text == "}":
            self.brace -= 1
        elif text == "[" and prev == "-":
            self.rel_bracket = True
        elif text == "]" and self.rel_bracket:
            self.rel_bracket = False
        elif text == "(" and self.brace == 0:
            self.node_paren.append(-1)
        elif text == ")" and self.node_paren and self.brace == 0:
            last = self.node_paren.pop()
            if last >= 0:
                self.out[last] += ":" + _quote(self.ns)  # the marker label: drop() finds every node of the namespace
        else:
            return False
        return True

    def _label(self, pos: int, prev: tuple[str, str]) -> None:
        """The label or type after a `:` (or a `|` in a relationship) moves into the namespace."""
        before = self._tok(pos - 2)[1] if pos > 1 else ""
        if self.brace > 0 and prev[0] in ("id", "bt") and before in ("{", ","):
            return  # a map key
        j = self.sig[pos + 1]
        self.out[j] = _quote(f"{self.ns}__{_name(*self.toks[j])}")
        self.anchored = True
        if self.node_paren and not self.rel_bracket and self.brace == 0:
            self.node_paren[-1] = j


def _strip(name: str, ns: str | None) -> str:
    return name[len(ns) + 2 :] if ns and name.startswith(ns + "__") else name


def _int_id(raw: Any) -> int:
    """The port's integer ids from Neptune's string ids: a stable 63-bit hash (the same node, the same id)."""
    if isinstance(raw, int):
        return raw
    return int.from_bytes(hashlib.sha256(str(raw).encode()).digest()[:8], "big") >> 1


def _entity(value: dict[str, Any], ns: str | None) -> GraphNode | GraphEdge | None:
    kind = value.get("~entityType")
    if kind == "node":
        labels = [_strip(str(x), ns) for x in value.get("~labels", []) if str(x) != ns]
        return GraphNode(_int_id(value["~id"]), labels, dict(value.get("~properties") or {}))
    if kind == "relationship":
        return GraphEdge(
            _int_id(value["~id"]),
            _strip(str(value["~type"]), ns),
            _int_id(value["~start"]),
            _int_id(value["~end"]),
            dict(value.get("~properties") or {}),
        )
    return None


def convert(value: Any, ns: str | None = None) -> Any:
    """Neptune's JSON values as the port's: node/relationship maps, and alternating lists as paths."""
    if isinstance(value, dict):
        ent = _entity(value, ns)
        return ent if ent is not None else {k: convert(v, ns) for k, v in value.items()}
    if isinstance(value, list):
        items = [convert(v, ns) for v in value]
        if (
            len(items) >= 3
            and len(items) % 2 == 1
            and all(isinstance(x, GraphNode if i % 2 == 0 else GraphEdge) for i, x in enumerate(items))
        ):
            nodes = [x for x in items if isinstance(x, GraphNode)]
            return GraphPath(nodes, [x for x in items if isinstance(x, GraphEdge)])
        return items
    return value


def neptune_client(timeout_max_ms: int) -> Any:
    """The neptune-graph client: its read timeout outlasts the longest query timeout this adapter sends."""
    return make_client("neptune-graph", read_timeout=timeout_max_ms / 1000 + CLIENT_GRACE_S)


class NeptuneGraphStore:
    def __init__(
        self,
        graph_id: str,
        *,
        byog_graphs: dict[str, str] | None = None,
        client: Any | None = None,
        timeout_default_ms: int = 8000,  # Settings.byog_read_timeout_ms
        timeout_max_ms: int = 30000,  # max(Settings.byog_read_timeout_ms, byog_write_timeout_ms)
    ) -> None:
        if not graph_id:
            raise ValueError("a Neptune Analytics graph id is required (CTXSTORE_GRAPH_ID)")
        self._graph_id = graph_id
        self._byog = dict(byog_graphs or {})
        self.timeout_max_ms = max(timeout_default_ms, timeout_max_ms)
        self.timeout_default_ms = timeout_default_ms
        # Two clients, so a call whose answer is lost is re-sent soon after its own query timeout: reads
        # (up to the default timeout) wait little, longer queries (writes) wait past the longest one.
        self._client = client or neptune_client(self.timeout_max_ms)
        self._short_client = client or neptune_client(self.timeout_default_ms)
        self._registered: set[tuple[str, str]] = set()

    # ---- the port ---------------------------------------------------------------------------
    def query(
        self,
        org: str,
        graph: str,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        read_only: bool = False,
        timeout_ms: int | None = None,
    ) -> GraphResult:
        write = is_write(cypher)
        if read_only and write:
            raise GraphQueryError("a read-only query cannot create, merge, set, remove or delete")
        target, ns = self._target(org, graph)
        if ns is not None:
            if is_index_statement(cypher):
                return GraphResult([], [])  # Neptune Analytics indexes every property itself
            cypher = namespace_query(cypher, ns)
            if write:
                self._register(org, graph, ns)
        cypher, params = inline_skip_limit(cypher, params or {})
        if ns is None:  # user Cypher (BYOG): say what Neptune would refuse, and why
            findings = check(cypher, params)
            if findings:
                raise GraphQueryError(f"Neptune Analytics does not accept this query: {findings[0]}")
        budget = timeout_ms or (self.timeout_max_ms if write else self.timeout_default_ms)
        rows = self._execute(target, cypher, params, min(budget, self.timeout_max_ms))
        columns = list(rows[0].keys()) if rows else []
        return GraphResult(columns, [[convert(r.get(c), ns) for c in columns] for r in rows])

    def read_many(self, org: str, reads: Sequence[GraphRead]) -> list[GraphResult]:
        """Side by side, a few at a time: ExecuteQuery takes one query, and each is an HTTPS round trip."""
        if len(reads) <= 1:
            return [self.query(org, graph, cypher, params, read_only=True) for graph, cypher, params in reads]
        # Each read in a copy of the caller's context: its spans stay children of the query's.
        futures = [
            _READS.submit(contextvars.copy_context().run, self.query, org, g, c, p, read_only=True) for g, c, p in reads
        ]
        return [f.result() for f in futures]

    def list_graphs(self, org: str, prefix: str) -> list[str]:
        names = {g.split("/", 1)[1] for g in self._byog if g.startswith(f"{org}/")}
        rows = self._execute(
            self._graph_id,
            f"MATCH (g:{REGISTRY_LABEL}) WHERE g.org = $org AND g.name STARTS WITH $prefix RETURN g.name AS name",
            {"org": org, "prefix": prefix},
            self.timeout_default_ms,
        )
        names.update(str(r["name"]) for r in rows)
        return sorted(n for n in names if n.startswith(prefix))

    def drop(self, org: str, graph: str) -> bool:
        target, ns = self._target(org, graph)
        label = _quote(ns) if ns is not None else None
        existed = False
        while True:  # in batches: one query must stay inside Neptune's limits
            match = f"MATCH (n:{label})" if label else "MATCH (n)"
            batch = f"{match} WITH n LIMIT {DROP_BATCH} DETACH DELETE n RETURN count(*) AS n"
            rows = self._execute(target, batch, {}, self.timeout_max_ms)
            deleted = int(rows[0]["n"]) if rows else 0
            existed = existed or deleted > 0
            if deleted < DROP_BATCH:
                break
        if ns is not None:
            rows = self._execute(
                self._graph_id,
                f"MATCH (g:{REGISTRY_LABEL} {{ns: $ns}}) DELETE g RETURN count(*) AS n",
                {"ns": ns},
                self.timeout_max_ms,
            )
            existed = existed or bool(rows and int(rows[0]["n"]))
            self._registered.discard((org, graph))
        return existed

    # ---- internals --------------------------------------------------------------------------
    def _target(self, org: str, graph: str) -> tuple[str, str | None]:
        if graph.startswith(SHARED_PREFIX):
            return self._graph_id, namespace(org, graph)
        mapped = self._byog.get(f"{org}/{graph}")
        if mapped is None:
            raise StoreUnavailable(
                "this BYOG collection has no Neptune Analytics graph of its own on this deployment "
                "(user queries cannot share one graph safely; see docs/aws.md)"
            )
        return mapped, None

    def _register(self, org: str, graph: str, ns: str) -> None:
        if (org, graph) in self._registered:
            return
        self._execute(
            self._graph_id,
            f"MERGE (g:{REGISTRY_LABEL} {{ns: $ns}}) SET g.org = $org, g.name = $name",
            {"ns": ns, "org": org, "name": graph},
            self.timeout_max_ms,
        )
        self._registered.add((org, graph))

    def _execute(self, target: str, cypher: str, params: dict[str, Any], timeout_ms: int) -> list[dict[str, Any]]:
        args: dict[str, Any] = {
            "graphIdentifier": target,
            "queryString": cypher,
            "language": "OPEN_CYPHER",
            "queryTimeoutMilliseconds": int(timeout_ms),
        }
        if params:
            args["parameters"] = params
        try:
            client = self._short_client if timeout_ms <= self.timeout_default_ms else self._client
            resp = client.execute_query(**args)
        except ClientError as exc:
            raise self._error(exc) from None
        except (HTTPClientError, BotoConnectionError) as exc:  # botocore's own retries are spent
            raise StoreUnavailable(f"graph store unreachable: {exc}") from None
        body = json.loads(resp["payload"].read() or b"{}")
        results = body.get("results", [])
        return [r for r in results if isinstance(r, dict)]

    @staticmethod
    def _error(exc: ClientError) -> Exception:
        code = error_code(exc)
        reason = str(exc.response.get("reason") or exc.response.get("Error", {}).get("reason") or "")
        message = str(exc.response.get("Error", {}).get("Message") or exc.response.get("message") or code)
        if code == "UnprocessableException" and reason == "QUERY_TIMEOUT":
            return GraphTimeout(message)
        if code in _TRANSIENT or http_status(exc) >= 500 or (code == "UnprocessableException" and reason in _LIMITS):
            return StoreUnavailable(f"graph store: {code} {reason}: {message}".strip())
        return GraphQueryError(message)
