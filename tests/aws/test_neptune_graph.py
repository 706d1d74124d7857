"""The Neptune Analytics graph adapter.

Two kinds of evidence (moto does not emulate neptune-graph):
* botocore Stubber with ExecuteQuery requests/responses in the documented format (openCypher JSON:
  nodes ``~id/~entityType/~labels/~properties``, relationships ``~start/~end/~type``, paths as
  alternating lists; errors ``UnprocessableException``/``ValidationException`` with a ``reason``);
* the adapter's own query path (namespacing, registry, drop, result conversion) run against a real
  openCypher engine: ``NeptuneOnFalkor`` answers ExecuteQuery from the local FalkorDB, holding *every*
  org's entity and item graphs in ONE physical graph, as a deployment does. The relations and subgraph
  API suites run unchanged on top of it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from ctxstore.adapters.aws.neptune_graph import NeptuneGraphStore, namespace, namespace_query
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.graph import GraphEdge, GraphNode, GraphPath, GraphQueryError, GraphTimeout
from tests.support.app import LocalApp, make_app

GRAPH_ID = "g-abcde12345"
ITEMS = "ctx:knowledge:acme:"


# ---- Stubber: the request and response formats ------------------------------------------------
def _client() -> Any:
    return boto3.client("neptune-graph", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _payload(results: list[dict[str, Any]]) -> dict[str, Any]:
    data = json.dumps({"results": results}).encode()
    return {"payload": StreamingBody(io.BytesIO(data), len(data))}


@pytest.fixture
def stubbed() -> Iterator[tuple[NeptuneGraphStore, Stubber]]:
    c = _client()
    with Stubber(c) as stub:
        yield NeptuneGraphStore(GRAPH_ID, client=c, byog_graphs={"o1/byog:db:col": "g-byog000001"}), stub
        stub.assert_no_pending_responses()


def test_read_query_request_and_result_conversion(stubbed: tuple[NeptuneGraphStore, Stubber]) -> None:
    store, stub = stubbed
    ns = namespace("o1", ITEMS)
    node_a = {"~id": "a-1", "~entityType": "node", "~labels": [f"{ns}__Source", ns], "~properties": {"sid": "d1"}}
    node_b = {"~id": "b-2", "~entityType": "node", "~labels": [f"{ns}__Source", ns], "~properties": {"sid": "d2"}}
    rel = {
        "~id": "r-9",
        "~entityType": "relationship",
        "~start": "a-1",
        "~end": "b-2",
        "~type": f"{ns}__LINKS",
        "~properties": {"relation": "cites"},
    }
    stub.add_response(
        "execute_query",
        _payload([{"s": node_a, "l": rel, "p": [node_a, rel, node_b], "n": 2, "m": {"k": [1, "x"]}}]),
        {
            "graphIdentifier": GRAPH_ID,
            "language": "OPEN_CYPHER",
            "queryString": f"MATCH p = (s:`{ns}__Source`:`{ns}` {{sid: $sid}})-[l:`{ns}__LINKS`]->"
            f"(t:`{ns}__Source`:`{ns}`) RETURN s, l, p, 2 AS n, {{k: [1, 'x']}} AS m",
            "parameters": {"sid": "d1"},
            "queryTimeoutMilliseconds": 5000,
        },
    )
    res = store.query(
        "o1", ITEMS,
        "MATCH p = (s:Source {sid: $sid})-[l:LINKS]->(t:Source) RETURN s, l, p, 2 AS n, {k: [1, 'x']} AS m",
        {"sid": "d1"}, read_only=True, timeout_ms=5000,
    )  # fmt: skip
    assert res.columns == ["s", "l", "p", "n", "m"]
    [[s, edge, path, n, m]] = res.rows
    assert isinstance(s, GraphNode) and s.labels == ["Source"] and s.properties == {"sid": "d1"}
    assert isinstance(edge, GraphEdge) and edge.relation == "LINKS" and edge.properties == {"relation": "cites"}
    assert (edge.source_node_id, edge.target_node_id) == (s.id, path.nodes[1].id)
    assert isinstance(path, GraphPath) and [x.properties["sid"] for x in path.nodes] == ["d1", "d2"]
    assert path.edges == [edge] and n == 2 and m == {"k": [1, "x"]}


def test_errors_map_to_the_ports_exceptions(stubbed: tuple[NeptuneGraphStore, Stubber]) -> None:
    store, stub = stubbed
    q = "MATCH (s:Source) RETURN s"
    stub.add_client_error(
        "execute_query",
        "UnprocessableException",
        "timed out",
        400,
        modeled_fields={"message": "timed out", "reason": "QUERY_TIMEOUT"},
    )
    stub.add_client_error("execute_query", "ThrottlingException", "slow down", 429)
    stub.add_client_error(
        "execute_query",
        "UnprocessableException",
        "memory",
        400,
        modeled_fields={"message": "memory", "reason": "MEMORY_LIMIT_EXCEEDED"},
    )
    stub.add_client_error(
        "execute_query",
        "ValidationException",
        "bad syntax at 3",
        400,
        modeled_fields={"message": "bad syntax at 3", "reason": "MALFORMED_QUERY"},
    )
    with pytest.raises(GraphTimeout):
        store.query("o1", ITEMS, q)
    with pytest.raises(StoreUnavailable):
        store.query("o1", ITEMS, q)
    with pytest.raises(StoreUnavailable):
        store.query("o1", ITEMS, q)
    with pytest.raises(GraphQueryError, match="bad syntax"):
        store.query("o1", ITEMS, q)


def test_writes_register_the_namespace_once_and_index_statements_are_no_ops(
    stubbed: tuple[NeptuneGraphStore, Stubber],
) -> None:
    store, stub = stubbed
    ns = namespace("o1", ITEMS)
    assert store.query("o1", ITEMS, "CREATE INDEX FOR (s:Source) ON (s.sid)").rows == []  # no call at all
    stub.add_response(
        "execute_query",
        _payload([]),
        {
            "graphIdentifier": GRAPH_ID,
            "language": "OPEN_CYPHER",
            "queryString": "MERGE (g:ctxstore_graph {ns: $ns}) SET g.org = $org, g.name = $name",
            "parameters": {"ns": ns, "org": "o1", "name": ITEMS},
        },
    )
    for _ in range(2):
        stub.add_response(
            "execute_query",
            _payload([]),
            {
                "graphIdentifier": GRAPH_ID,
                "language": "OPEN_CYPHER",
                "queryString": f"MERGE (s:`{ns}__Source`:`{ns}` {{sid: $sid}}) ON CREATE SET s.ghost = true",
                "parameters": {"sid": "d1"},
            },
        )
        store.query("o1", ITEMS, "MERGE (s:Source {sid: $sid}) ON CREATE SET s.ghost = true", {"sid": "d1"})


def test_byog_runs_unrewritten_on_its_own_graph_or_not_at_all(stubbed: tuple[NeptuneGraphStore, Stubber]) -> None:
    store, stub = stubbed
    stub.add_response(
        "execute_query",
        _payload([{"c": 0}]),
        {
            "graphIdentifier": "g-byog000001",
            "language": "OPEN_CYPHER",
            "queryString": "MATCH (n) RETURN count(n) AS c",
        },
    )
    assert store.query("o1", "byog:db:col", "MATCH (n) RETURN count(n) AS c", read_only=True).rows == [[0]]
    with pytest.raises(StoreUnavailable, match="own"):
        store.query("o2", "byog:db:col", "MATCH (n) RETURN n")  # another org's name is not mapped
    with pytest.raises(GraphQueryError, match="read-only"):
        store.query("o1", "byog:db:col", "MATCH (n) DETACH DELETE n", read_only=True)


def test_build_aws_wires_the_graph_store_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws
    from tests.aws.moto_env import set_minimal_aws_env

    set_minimal_aws_env(
        monkeypatch,
        CTXSTORE_GRAPH_ID=GRAPH_ID,
        CTXSTORE_BYOG_GRAPH_IDS='{"o1/byog:db:col": "g-byog000001"}',
    )
    graph = build_aws(Settings()).graph
    assert isinstance(graph, NeptuneGraphStore)
    assert graph._graph_id == GRAPH_ID and graph._target("o1", "byog:db:col") == ("g-byog000001", None)
    monkeypatch.delenv("CTXSTORE_GRAPH_ID")
    assert build_aws(Settings()).graph is None


# ---- the namespacing rewrite ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "MATCH (a)-[r:REL]->(b) WHERE r.item_id = $id RETURN a.eid AS s",
            "MATCH (a)-[r:`N__REL`]->(b) WHERE r.item_id = $id RETURN a.eid AS s",
        ),
        (
            "UNWIND $rows AS e MERGE (n:Entity {eid: e.eid}) ON CREATE SET n.name = e.name",
            "UNWIND $rows AS e MERGE (n:`N__Entity`:`N` {eid: e.eid}) ON CREATE SET n.name = e.name",
        ),
        (
            "MATCH (s:Source {sid: 'a:b'}) WITH s MATCH (s)-[:MENTIONS|LINKS]->(e) WHERE e:Entity RETURN e",
            "MATCH (s:`N__Source`:`N` {sid: 'a:b'}) WITH s MATCH (s)-[:`N__MENTIONS`|`N__LINKS`]->(e) "
            "WHERE e:`N__Entity` RETURN e",
        ),
        (
            "MATCH (s:Source {sid: $sid}) OPTIONAL MATCH (s)-[l]->() DELETE l",
            "MATCH (s:`N__Source`:`N` {sid: $sid}) OPTIONAL MATCH (s)-[l]->() DELETE l",
        ),
        (
            "MATCH (n:`Odd Label`) RETURN [x IN n.xs | x] AS xs, {a: 1, b: {c: 2}} AS m",
            "MATCH (n:`N__Odd Label`:`N`) RETURN [x IN n.xs | x] AS xs, {a: 1, b: {c: 2}} AS m",
        ),
    ],
)
def test_namespace_query(query: str, expected: str) -> None:
    assert namespace_query(query, "N") == expected


@pytest.mark.parametrize(
    "query",
    [
        "MATCH (n) RETURN n",
        "MATCH (a:Source), (b) RETURN a, b",
        "MATCH (a:Source) WITH a MATCH (b)-[r]->(c) RETURN r",
        "UNWIND $xs AS x MATCH (x) RETURN x",
        "CREATE (x) RETURN x",
        "MATCH (n:Source) RETURN labels(n)",
        "MATCH ()-[r:REL]->() RETURN type(r)",
        "MATCH (n:Source {sid: 'unterminated}) RETURN n",
    ],
)
def test_queries_that_cannot_be_namespaced_are_refused(query: str) -> None:
    with pytest.raises(GraphQueryError):
        namespace_query(query, "N")


# ---- the adapter over a real openCypher engine, every graph in one physical graph -------------
class NeptuneOnFalkor(NeptuneGraphStore):
    """ExecuteQuery answered by FalkorDB (one physical graph per Neptune graph id) in Neptune's JSON format."""

    def __init__(self, engine: Any) -> None:
        super().__init__(GRAPH_ID, client=object())
        self.engine = engine
        self.sent: list[str] = []

    def _execute(
        self, target: str, cypher: str, params: dict[str, Any], timeout_ms: int | None
    ) -> list[dict[str, Any]]:
        self.sent.append(cypher)
        res = self.engine.query("_neptune", target, cypher, params or None, timeout_ms=timeout_ms)
        return [{c: _neptune_json(v) for c, v in zip(res.columns, row, strict=True)} for row in res.rows]


def _neptune_json(v: Any) -> Any:
    if isinstance(v, GraphNode):
        return {"~id": f"n{v.id}", "~entityType": "node", "~labels": v.labels, "~properties": v.properties}
    if isinstance(v, GraphEdge):
        return {
            "~id": f"e{v.id}",
            "~entityType": "relationship",
            "~start": f"n{v.source_node_id}",
            "~end": f"n{v.target_node_id}",
            "~type": v.relation,
            "~properties": v.properties,
        }
    if isinstance(v, GraphPath):
        out: list[Any] = [_neptune_json(v.nodes[0])]
        for e, n in zip(v.edges, v.nodes[1:], strict=True):
            out += [_neptune_json(e), _neptune_json(n)]
        return out
    if isinstance(v, list):
        return [_neptune_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _neptune_json(x) for k, x in v.items()}
    return v


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "data")
    la.container.graph = NeptuneOnFalkor(la.container.graph)
    yield la
    la.close()


@pytest.fixture
def other_key(local: LocalApp) -> str:
    return local.services.keys.create("other")


def test_graphs_share_one_physical_graph_yet_stay_isolated_and_drop_alone(local: LocalApp, other_key: str) -> None:
    from tests.api.test_relations import PAYLOAD, TEXT, relations, triples

    store = local.container.graph
    assert isinstance(store, NeptuneOnFalkor)
    for key in (None, other_key):
        local.create_ready_database("acme", key)
    items = [{"id": "d1", "title": "T", "type": "note", "content": {"text": TEXT}}]
    form = {"database": "acme", "app_knowledge": json.dumps(items), "graph_payload": json.dumps({"d1": PAYLOAD})}
    assert local.client.post("/context/ingest", data=form, headers=local.headers()).status_code == 202
    local.drain()
    mine = relations(local)
    assert ("Ada Lovelace", "works_at", "Acme Corp") in triples(mine.json()["data"])
    theirs = local.client.get("/context/relations", params={"database": "acme"}, headers=local.headers(other_key))
    assert theirs.status_code == 200 and theirs.json()["data"]["relations"] == []
    # one physical graph holds it all; every node carries its namespace's marker label
    engine = store.engine
    labels = engine.query("_neptune", GRAPH_ID, "MATCH (n) RETURN DISTINCT labels(n)").rows
    ns = namespace("default", "ctx:knowledge:acme:")
    assert all(ns in row[0] or row[0] == ["ctxstore_graph"] for row in labels), labels
    assert store.list_graphs("default", "ctx:knowledge:acme:") == ["ctx:knowledge:acme:"]
    assert store.list_graphs("other", "ctx:") == []
    assert all("MATCH (n) " not in q for q in store.sent if "DETACH DELETE" not in q)
    assert store.drop("default", "ctx:knowledge:acme:") is True
    assert store.list_graphs("default", "ctx:") == []
    assert engine.query("_neptune", GRAPH_ID, "MATCH (n) RETURN count(n)").rows == [[0]]
    assert relations(local).json()["data"]["relations"] == []


def test_database_delete_drops_its_namespaces(local: LocalApp) -> None:
    from tests.api.test_relations import PAYLOAD, TEXT

    local.create_ready_database("acme")
    items = [{"id": "d1", "title": "T", "type": "note", "content": {"text": TEXT}}]
    form = {"database": "acme", "app_knowledge": json.dumps(items), "graph_payload": json.dumps({"d1": PAYLOAD})}
    local.client.post("/context/ingest", data=form, headers=local.headers())
    local.drain()
    store = local.container.graph
    assert isinstance(store, NeptuneOnFalkor)
    assert store.list_graphs("default", "ctx:") != []
    deleted = local.client.delete("/databases", params={"database": "acme"}, headers=local.headers())
    assert deleted.status_code in (200, 202), deleted.text
    local.drain()
    assert store.list_graphs("default", "ctx:") == []
    assert store.engine.query("_neptune", GRAPH_ID, "MATCH (n) RETURN count(n)").rows == [[0]]


# The relations and subgraph API suites, unchanged, on the adapter (`local` above overrides theirs).
from tests.api.test_relations import *  # noqa: E402, F403
from tests.api.test_subgraph import *  # noqa: E402, F403
from tests.api.test_subgraph import test_memory_graph_is_separate_and_subgraph_uses_query_rate_class as _skip  # noqa: E402

del _skip, test_memory_graph_is_separate_and_subgraph_uses_query_rate_class  # noqa: F821 (builds its own app)
