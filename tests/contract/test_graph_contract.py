"""Contract of the GraphStore port (ports/graph.py) on FalkorDB and on the Neptune Analytics adapter.

Isolation between organisations and graph names, MERGE idempotence, list_graphs and drop, read-only
queries, timeouts -> GraphTimeout, invalid queries -> GraphQueryError, parameters as data, and the
result types (scalars, maps, GraphNode, GraphEdge, GraphPath). Entity and item graphs are named
`ctx:...`; user (BYOG) graphs take any other name and run unrewritten Cypher.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from ctxstore.ports.graph import GraphEdge, GraphNode, GraphPath, GraphQueryError, GraphStore, GraphTimeout
from tests.contract.graph_factories import GRAPH_BACKENDS, USER_GRAPHS, Backend, opened

G1, G2 = "ctx:knowledge:db1:", "ctx:knowledge:db2:"
Refused = Callable[[], AbstractContextManager[None]]


@pytest.fixture(scope="module", params=sorted(GRAPH_BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    with opened(request.param, tmp_path_factory.mktemp(request.param)) as b:
        yield b


@pytest.fixture
def org() -> str:
    return f"org-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def opened_store(backend: Backend, org: str) -> tuple[GraphStore, Refused]:
    return backend.open(org)


@pytest.fixture
def store(opened_store: tuple[GraphStore, Refused]) -> GraphStore:
    return opened_store[0]


def count(store: GraphStore, org: str, graph: str, label: str = "P") -> int:
    res = store.query(org, graph, f"MATCH (n:{label}) RETURN count(n) AS c", read_only=True)
    return int(res.rows[0][0])


def test_parameters_travel_as_data_and_scalars_come_back(store: GraphStore, org: str) -> None:
    hostile = "x'}) MATCH (m) DETACH DELETE m //"
    params: dict[str, Any] = {"name": hostile, "age": 42, "score": 0.5, "ok": True}
    store.query(org, G1, "MERGE (n:P {name: $name}) SET n.age = $age, n.score = $score, n.ok = $ok", params)
    res = store.query(
        org,
        G1,
        "MATCH (n:P {name: $name}) RETURN n.name AS name, n.age AS age, n.score AS score, n.ok AS ok,"
        " $tags AS tags, {k: [1, 'x']} AS m",
        {"name": hostile, "tags": ["a", "b"]},
        read_only=True,
    )
    assert res.columns == ["name", "age", "score", "ok", "tags", "m"]
    assert res.rows == [[hostile, 42, 0.5, True, ["a", "b"], {"k": [1, "x"]}]]
    # (list-valued properties are left out: Neptune keeps them as sets, and its dialect check refuses them)
    plain = store.query(org, G1, "RETURN $x AS x", {"x": "no graph needed"}, read_only=True)
    assert plain.rows == [["no graph needed"]]


def test_merge_is_idempotent(store: GraphStore, org: str) -> None:
    write = "MERGE (a:P {name: $a}) MERGE (b:P {name: $b}) MERGE (a)-[r:KNOWS {since: $since}]->(b) RETURN a.name AS a"
    for _ in range(3):
        store.query(org, G1, write, {"a": "ada", "b": "bob", "since": 2020})
    assert count(store, org, G1) == 2
    res = store.query(org, G1, "MATCH (:P)-[r:KNOWS]->(:P) RETURN count(r) AS c", read_only=True)
    assert res.rows == [[1]]


def test_nodes_edges_and_paths_come_back_typed(store: GraphStore, org: str) -> None:
    store.query(
        org,
        G1,
        "MERGE (a:P {name: 'ada'}) MERGE (b:P {name: 'bob'}) MERGE (c:P {name: 'cy'})"
        " MERGE (a)-[:KNOWS {w: 1}]->(b) MERGE (b)-[:KNOWS {w: 2}]->(c)",
    )
    res = store.query(
        org,
        G1,
        "MATCH p = (a:P {name: 'ada'})-[r1:KNOWS]->(b:P)-[r2:KNOWS]->(c:P) RETURN a, r1, p",
        read_only=True,
    )
    [[a, r1, p]] = res.rows
    assert isinstance(a, GraphNode) and a.labels == ["P"] and a.properties == {"name": "ada"}
    assert isinstance(r1, GraphEdge) and r1.relation == "KNOWS" and r1.properties == {"w": 1}
    assert isinstance(p, GraphPath) and [n.properties["name"] for n in p.nodes] == ["ada", "bob", "cy"]
    assert [e.properties["w"] for e in p.edges] == [1, 2] and all(e.relation == "KNOWS" for e in p.edges)
    assert p.nodes[0].id == a.id and p.edges[0].id == r1.id
    assert (r1.source_node_id, r1.target_node_id) == (p.nodes[0].id, p.nodes[1].id)
    assert (p.edges[1].source_node_id, p.edges[1].target_node_id) == (p.nodes[1].id, p.nodes[2].id)
    assert len({n.id for n in p.nodes}) == 3
    listed = store.query(org, G1, "MATCH (n:P) RETURN collect(n.name) AS names", read_only=True)
    assert sorted(listed.rows[0][0]) == ["ada", "bob", "cy"]


def test_graphs_are_isolated_by_org_and_name(backend: Backend, store: GraphStore, org: str) -> None:
    other_org = org + "-b"
    other, _ = backend.open(other_org)
    store.query(org, G1, "UNWIND range(1, 3) AS i MERGE (:P {i: i})")
    store.query(org, G2, "MERGE (:P {i: 1})")
    other.query(other_org, G1, "MERGE (:P {i: 1})")
    assert (count(store, org, G1), count(store, org, G2), count(other, other_org, G1)) == (3, 1, 1)
    assert count(store, org, "ctx:knowledge:never-written:") == 0
    # user graphs: unlabelled patterns see their own graph only
    for name in USER_GRAPHS:
        store.query(org, name, "CREATE (:Q {g: $g})", {"g": name})
    other.query(other_org, USER_GRAPHS[0], "CREATE (:Q {g: 'theirs'}), (:Q {g: 'theirs'})")
    for name in USER_GRAPHS:
        assert store.query(org, name, "MATCH (n) RETURN n.g AS g", read_only=True).rows == [[name]]
    res = other.query(other_org, USER_GRAPHS[0], "MATCH (n) RETURN count(n) AS c", read_only=True)
    assert res.rows == [[2]]


def test_list_graphs_and_drop(backend: Backend, store: GraphStore, org: str) -> None:
    other_org = org + "-b"
    other, _ = backend.open(other_org)
    assert store.list_graphs(org, "ctx:") == []
    for g in (G2, G1, "ctx:memory:db1:"):
        store.query(org, g, "MERGE (:P {i: 1})")
    other.query(other_org, "ctx:knowledge:theirs:", "MERGE (:P {i: 1})")
    assert store.list_graphs(org, "ctx:knowledge:") == [G1, G2]
    assert store.list_graphs(org, "ctx:") == [G1, G2, "ctx:memory:db1:"]
    assert store.drop(org, G1) is True
    assert store.drop(org, G1) is False
    assert store.drop(org, "ctx:knowledge:never-written:") is False
    assert store.list_graphs(org, "ctx:knowledge:") == [G2]
    assert count(store, org, G1) == 0 and count(store, org, G2) == 1
    assert other.list_graphs(other_org, "ctx:") == ["ctx:knowledge:theirs:"]
    store.query(org, G1, "MERGE (:P {i: 2})")  # a dropped graph can be written again, and starts empty
    assert store.query(org, G1, "MATCH (n:P) RETURN n.i AS i", read_only=True).rows == [[2]]


def test_read_many_answers_as_each_read_alone(opened_store: tuple[GraphStore, Refused], org: str) -> None:
    store, _ = opened_store
    store.query(org, G1, "UNWIND range(1, 3) AS i MERGE (:P {i: i})")
    store.query(org, G2, "MERGE (:P {i: 7})")
    never = "ctx:knowledge:never-written:"
    reads = [
        (G1, "MATCH (n:P) WHERE n.i >= $lo RETURN n.i AS i ORDER BY i", {"lo": 2}),
        (never, "MATCH (n:P) RETURN n.i AS i", {}),
        (G2, "MATCH (n:P) RETURN n.i AS i, $tag AS tag", {"tag": "x'y"}),
    ]
    batched = store.read_many(org, reads)
    alone = [store.query(org, g, c, p, read_only=True) for g, c, p in reads]
    assert [(r.columns, r.rows) for r in batched] == [(r.columns, r.rows) for r in alone]
    assert [r.rows for r in batched] == [[[2], [3]], [], [[7, "x'y"]]]
    assert store.read_many(org, []) == []
    with pytest.raises(GraphQueryError):
        store.read_many(org, [(G1, "MATCH (n:P) RETURN n.i AS i", {}), (G2, "MATCH (n RETURN n", {})])


def test_read_only_queries_cannot_write(opened_store: tuple[GraphStore, Refused], org: str) -> None:
    store, refused = opened_store
    store.query(org, G1, "MERGE (:P {i: 1})")
    with refused(), pytest.raises(GraphQueryError):
        store.query(org, G1, "CREATE (:P {i: 2})", read_only=True)
    assert count(store, org, G1) == 1


@pytest.mark.parametrize(
    "bad",
    [
        "MATCH (n:P RETURN n",  # syntax
        "MATCH (n:P) RETURN nosuchfunction(n) AS x",  # unknown function
        "MATCH (n:P) RETURN m",  # unbound variable
    ],
)
def test_invalid_queries_raise_graph_query_error(opened_store: tuple[GraphStore, Refused], org: str, bad: str) -> None:
    store, refused = opened_store
    with refused(), pytest.raises(GraphQueryError):
        store.query(org, G1, bad, read_only=True)
    with refused(), pytest.raises(GraphQueryError):
        store.query(org, USER_GRAPHS[0], bad, read_only=True)


def test_a_query_over_its_budget_raises_graph_timeout(store: GraphStore, org: str) -> None:
    slow = "UNWIND range(1, 100000000) AS x WITH x WHERE x % 7 = 3 RETURN count(x) AS c"
    with pytest.raises(GraphTimeout):
        store.query(org, G1, slow, read_only=True, timeout_ms=50)
    assert store.query(org, G1, "RETURN 1 AS one", read_only=True).rows == [[1]]  # the store still answers
