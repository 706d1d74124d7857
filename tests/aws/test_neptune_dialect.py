"""The Neptune openCypher dialect checker (adapters/aws/neptune_dialect.py): each documented rule, on tokens."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore.adapters.aws.neptune_dialect import check, inline_skip_limit
from ctxstore.services.graphs.entity_graph import REL_VISIBLE
from ctxstore.services.graphs.item_graph import NEIGHBOURS, NODE_VISIBLE, REACHES_BEYOND


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("MATCH (n) WHERE any(t IN $ts WHERE n.acl CONTAINS t) RETURN n", "list comprehension"),
        ("MATCH (n) WHERE ALL(x IN n.xs WHERE x > 1) RETURN n", "list comprehension"),
        ("MATCH (n) WHERE none(x IN [1] WHERE x = 2) RETURN n", "list comprehension"),
        ("MATCH (n) WHERE single(x IN [1] WHERE x = 1) RETURN n", "list comprehension"),
        ("MATCH p = shortestPath((a:A)-[*]->(b:B)) RETURN p", "shortestPath"),
        ("MATCH (a), (b) RETURN allShortestPaths((a)-[*]->(b))", "allShortestPaths"),
        ("MATCH (n) RETURN n LIMIT toInteger(rand() * 9)", "static"),
        ("MATCH (n) WITH n SKIP $offset RETURN n", "static"),
        ("MATCH (n) RETURN n LIMIT 1 + 1", "static"),
        ("CALL db.labels() YIELD label RETURN label", "CALL db.labels"),
        ("MATCH (n) CALL { WITH n RETURN 1 AS x } RETURN x", "subqueries"),
        ("RETURN apoc.coll.sum([1, 2]) AS s", "user-defined"),
        ("MATCH (n) RETURN typeOf(n.x)", "typeOf"),
        ("MANDATORY MATCH (n) RETURN n", "MANDATORY"),
        ("MATCH (n) CREATE (m:M) RETURN n UNION MATCH (n) RETURN n", "UNION"),
        ("MATCH (n) FOREACH (x IN [1] | SET n.x = x)", "FOREACH"),
        ("LOAD CSV FROM 'f' AS row RETURN row", "LOAD"),
        ("CREATE INDEX FOR (n:A) ON (n.b)", "index"),
        ("CREATE CONSTRAINT c FOR (n:A) REQUIRE n.b IS UNIQUE", "constraint"),
        ("RETURN 2 ^ 3", "^"),
        ("MATCH (a), (b) CREATE (a)-[:K {`~id`: 'e1'}]->(b)", "custom edge ids"),
    ],
)
def test_documented_unsupported_constructs_are_flagged(query: str, needle: str) -> None:
    findings = check(query)
    assert findings and needle.lower() in str(findings[0]).lower(), findings


@pytest.mark.parametrize(
    "query",
    [
        "MATCH (n) WHERE size([t IN $ts WHERE n.acl CONTAINS t]) > 0 RETURN n",
        "MATCH (n) WITH collect(n) AS all RETURN all[0..2], size(all) AS total",  # `all` as a variable
        "MATCH (n) WITH n LIMIT 10000 DETACH DELETE n RETURN count(*) AS n",
        "MATCH (n) RETURN n.limit AS limit, {skip: 1} AS m ORDER BY n.x SKIP 2 LIMIT 3",
        "MATCH (n:Call:Foreach) RETURN n",  # labels, not clauses
        "CALL neptune.algo.bfs(n) YIELD node RETURN node",  # Neptune Analytics' own procedures
        "MATCH (a)-[r:R]->(b) RETURN 'any(x IN y WHERE z)', startNode(r), endNode(r)",  # a string is data
        "UNWIND $eids AS eid MATCH (e:Entity {eid: eid}) WHERE NOT (e)--() DELETE e",
        "MATCH (n) RETURN reduce(a = 0, x IN [1, 2] | a + x) AS s",  # documented for Neptune Analytics
        "MATCH (a)-[r:R {`~id`: 'neptune_reserved_1_1'}]->(b) RETURN r",  # reading by edge id is fine
    ],
)
def test_supported_constructs_pass(query: str) -> None:
    assert check(query) == []


def test_reduce_and_neptune_procedures_differ_on_neptune_database() -> None:
    assert check("RETURN reduce(a = 0, x IN [1] | a + x)", engine="database")
    assert check("CALL neptune.algo.bfs(n) YIELD node RETURN node", engine="database")


@pytest.mark.parametrize(
    ("query", "params", "flagged"),
    [
        ("MATCH (n) SET n.tags = $tags", {"tags": ["a", "b"]}, True),
        ("MATCH (n) SET n.tags = $tags", {"tags": "a,b"}, False),
        ("MATCH (n) SET n = $props", {"props": {"a": 1, "b": [1]}}, True),
        ("MATCH (n) SET n += $props", {"props": {"a": 1, "b": None}}, False),
        ("CREATE (n:A {m: $m})", {"m": {"k": 1}}, True),
        ("UNWIND $rows AS r MATCH (a), (b) MERGE (a)-[e:R {rid: r.rid}]->(b) SET e = r.props",
         {"rows": [{"rid": "x", "props": {"rid": "x", "s": [1]}}]}, True),
        ("UNWIND $rows AS r MATCH (a), (b) MERGE (a)-[e:R {rid: r.rid}]->(b) SET e = r.props",
         {"rows": [{"rid": "x", "props": {"rid": "x", "t": None, "c": 0.5, "p": True}}]}, False),
        ("UNWIND $rows AS e MERGE (n:E {eid: e.eid}) ON CREATE SET n.name = e.name",
         {"rows": [{"eid": "1", "name": ["x"]}]}, True),
        ("MATCH (n) WHERE n.x IN $xs RETURN n", {"xs": [1, 2]}, False),  # a list as an argument is fine
    ],
)  # fmt: skip
def test_list_and_map_property_values_are_flagged_through_parameters(
    query: str, params: dict[str, Any], flagged: bool
) -> None:
    findings = check(query, params)
    assert bool(findings) is flagged, findings
    if flagged:
        assert "property" in str(findings[0])


def test_integer_skip_and_limit_parameters_are_inlined() -> None:
    q, p = inline_skip_limit("MATCH (n) RETURN n SKIP $o LIMIT $l", {"o": 5, "l": 10, "x": 1})
    assert (q, p) == ("MATCH (n) RETURN n SKIP 5 LIMIT 10", {"x": 1})
    assert check(q, p) == []
    # a parameter also used elsewhere stays; a non-integer is left for the engine to judge
    q, p = inline_skip_limit("MATCH (n) WHERE n.i < $cap RETURN n LIMIT $cap", {"cap": 3})
    assert (q, p) == ("MATCH (n) WHERE n.i < $cap RETURN n LIMIT 3", {"cap": 3})
    assert inline_skip_limit("RETURN 1 LIMIT $l", {"l": "3"}) == ("RETURN 1 LIMIT $l", {"l": "3"})
    assert inline_skip_limit("RETURN 1 LIMIT $l", {"l": True}) == ("RETURN 1 LIMIT $l", {"l": True})


def test_the_graph_services_acl_predicates_are_neptune_openCypher() -> None:
    assert check(f"MATCH (a)-[r:REL]->(b) WHERE {REL_VISIBLE} RETURN r") == []
    assert check(f"MATCH (n:Source) WHERE {NODE_VISIBLE} RETURN n") == []
    for query in (NEIGHBOURS, REACHES_BEYOND):
        inlined, params = inline_skip_limit(query, {"cap": 1000})
        assert check(inlined, params) == []
