"""BYOG routes against the embedded FalkorDB engine: every route and rule of the spec's Graph database section."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.config import Settings
from tests.support.app import LocalApp, make_app

MAX_ROWS = 100


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    # Small budgets and cap so the limits can be exercised quickly; the defaults are checked separately.
    la = make_app(
        tmp_path_factory.mktemp("byog") / "data",
        byog_max_rows=MAX_ROWS,
        byog_read_timeout_ms=1000,
        byog_write_timeout_ms=2000,
    )
    yield la
    la.close()


@pytest.fixture(scope="module")
def other(app: LocalApp) -> str:
    return app.services.keys.create("other-org")


_n = 0


def fresh_db(app: LocalApp, key: str | None = None) -> str:
    global _n
    _n += 1
    name = f"g{_n}"
    r = app.client.post("/byog/databases", json={"database": name}, headers=app.headers(key))
    assert r.status_code == 200, r.text
    return name


def q(
    app: LocalApp,
    db: str,
    query: str,
    params: dict[str, Any] | None = None,
    col: str = "c1",
    key: str | None = None,
) -> Any:
    body: dict[str, Any] = {"database": db, "collection": col, "query": query}
    if params is not None:
        body["params"] = params
    return app.client.post("/byog/query", json=body, headers=app.headers(key))


def rows(app: LocalApp, db: str, query: str, params: dict[str, Any] | None = None, col: str = "c1") -> Any:
    r = q(app, db, query, params, col)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True and body["error"] is None
    return body["data"]


def assert_fail(r: Any, status: int, code: str, *needles: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["success"] is False and body["data"] is None
    assert body["error"]["code"] == code
    # BYOG failures mirror the error in `detail`
    assert body["detail"]["error_code"] == code
    assert body["detail"]["message"] == body["error"]["message"]
    for n in needles:
        assert n.lower() in body["error"]["message"].lower(), body["error"]["message"]
    return body


# ---- databases ---------------------------------------------------------------------------
def test_create_database_ready_at_once_and_duplicate_409(app: LocalApp) -> None:
    r = app.client.post("/byog/databases", json={"database": "shop"}, headers=app.headers())
    assert r.status_code == 200
    assert r.json()["data"] == {"database": "shop", "status": "ready", "cluster": "local"}
    # usable at once
    assert rows(app, "shop", "RETURN 1 AS one") == [{"one": 1}]
    dup = app.client.post("/byog/databases", json={"database": "shop"}, headers=app.headers())
    assert_fail(dup, 409, "DATABASE_ALREADY_EXISTS", "shop")


def test_byog_databases_are_apart_from_core_databases(app: LocalApp) -> None:
    db = fresh_db(app)
    r = app.client.get("/databases/status", params={"database": db}, headers=app.headers())
    assert r.status_code == 404
    assert "detail" not in r.json() or r.json()["detail"].get("error_code") != "FORBIDDEN"


def test_missing_database_field_is_400(app: LocalApp) -> None:
    r = app.client.post("/byog/databases", json={}, headers=app.headers())
    assert_fail(r, 400, "INVALID_PARAMETERS", "database")


def test_legacy_tenant_id_in_body_is_accepted(app: LocalApp) -> None:
    r = app.client.post("/byog/databases", json={"tenant_id": "legacy-db"}, headers=app.headers())
    assert r.status_code == 200, r.text
    assert r.json()["data"]["database"] == "legacy-db"


# ---- authentication ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer csk_nope_nope"},
        {"Authorization": "Basic abc"},
    ],
)
def test_bad_key_is_403_on_byog(app: LocalApp, headers: dict[str, str]) -> None:
    for method, path, body in (
        ("POST", "/byog/databases", {"database": "x"}),
        ("POST", "/byog/query", {"database": "x", "collection": "c", "query": "RETURN 1"}),
        ("GET", "/byog/collections?database=x", None),
        ("DELETE", "/byog/collections", {"database": "x", "collection": "c"}),
        ("DELETE", "/byog/databases", {"database": "x"}),
    ):
        r = app.client.request(method, path, json=body, headers={"API-Version": "2", **headers})
        assert_fail(r, 403, "FORBIDDEN")
    # core routes keep 401
    r = app.client.get("/databases", headers={"API-Version": "2", **headers})
    assert r.status_code == 401


# ---- collections and isolation -----------------------------------------------------------
def test_collections_created_on_first_write_and_reads_of_missing_are_empty(app: LocalApp) -> None:
    db = fresh_db(app)
    assert rows(app, db, "MATCH (n) RETURN n", col="never-written") == []
    listed = app.client.get("/byog/collections", params={"database": db}, headers=app.headers())
    assert listed.json()["data"] == {"database": db, "collections": []}
    # rule 5: a write without RETURN answers []
    assert rows(app, db, "CREATE (:A {v: 1})", col="a") == []
    assert rows(app, db, "CREATE (:B {v: 2})", col="b-2") == []
    listed = app.client.get("/byog/collections", params={"database": db}, headers=app.headers())
    assert listed.json()["data"] == {"database": db, "collections": ["a", "b-2"]}
    # each collection is its own graph
    assert rows(app, db, "MATCH (n) RETURN labels(n) AS l", col="a") == [{"l": ["A"]}]
    assert rows(app, db, "MATCH (n) RETURN labels(n) AS l", col="b-2") == [{"l": ["B"]}]


def test_unknown_database_is_404(app: LocalApp) -> None:
    assert_fail(q(app, "nope", "RETURN 1"), 404, "DATABASE_NOT_FOUND")
    r = app.client.get("/byog/collections", params={"database": "nope"}, headers=app.headers())
    assert_fail(r, 404, "DATABASE_NOT_FOUND")
    r = app.client.request(
        "DELETE", "/byog/collections", json={"database": "nope", "collection": "c"}, headers=app.headers()
    )
    assert_fail(r, 404, "DATABASE_NOT_FOUND")
    r = app.client.request("DELETE", "/byog/databases", json={"database": "nope"}, headers=app.headers())
    assert_fail(r, 404, "DATABASE_NOT_FOUND")


@pytest.mark.parametrize("name", ["_x", "-x", "a b", "a:b", "a.b", "é", "x" * 65, ""])
def test_collection_name_rule(app: LocalApp, name: str) -> None:
    db = fresh_db(app)
    assert_fail(q(app, db, "RETURN 1", col=name), 400, "INVALID_PARAMETERS", "collection")


def test_collection_name_of_64_chars_is_fine(app: LocalApp) -> None:
    db = fresh_db(app)
    name = "A1_-" + "z" * 60
    assert rows(app, db, "CREATE (n:X) RETURN count(n) AS c", col=name) == [{"c": 1}]


def test_organisations_are_isolated(app: LocalApp, other: str) -> None:
    db = fresh_db(app)
    rows(app, db, "CREATE (:Secret {v: 'mine'})")
    # the other organisation sees no such database
    assert_fail(q(app, db, "MATCH (n) RETURN n", key=other), 404, "DATABASE_NOT_FOUND")
    r = app.client.get("/byog/collections", params={"database": db}, headers=app.headers(other))
    assert_fail(r, 404, "DATABASE_NOT_FOUND")
    # it may create one with the same name, and sees only its own nodes there
    r = app.client.post("/byog/databases", json={"database": db}, headers=app.headers(other))
    assert r.status_code == 200
    assert q(app, db, "MATCH (n) RETURN n", key=other).json()["data"] == []
    q(app, db, "CREATE (:Theirs {v: 'theirs'})", key=other)
    assert rows(app, db, "MATCH (n) RETURN n.v AS v") == [{"v": "mine"}]
    assert q(app, db, "MATCH (n) RETURN n.v AS v", key=other).json()["data"] == [{"v": "theirs"}]
    # deleting theirs leaves mine
    r = app.client.request("DELETE", "/byog/databases", json={"database": db}, headers=app.headers(other))
    assert r.status_code == 200
    assert rows(app, db, "MATCH (n) RETURN n.v AS v") == [{"v": "mine"}]


def test_delete_collection(app: LocalApp) -> None:
    db = fresh_db(app)
    rows(app, db, "CREATE (:A)", col="keep")
    rows(app, db, "CREATE (:A)", col="drop")
    r = app.client.request(
        "DELETE", "/byog/collections", json={"database": db, "collection": "drop"}, headers=app.headers()
    )
    assert r.status_code == 200
    assert r.json()["data"] == {"database": db, "collection": "drop", "deleted": True}
    assert rows(app, db, "MATCH (n) RETURN count(n) AS c", col="drop") == [{"c": 0}]
    assert rows(app, db, "MATCH (n) RETURN count(n) AS c", col="keep") == [{"c": 1}]
    # missing collection: still succeeds
    r = app.client.request(
        "DELETE", "/byog/collections", json={"database": db, "collection": "ghost"}, headers=app.headers()
    )
    assert r.status_code == 200 and r.json()["data"]["deleted"] is True


def test_delete_database_drops_and_lists_collections(app: LocalApp) -> None:
    db = fresh_db(app)
    rows(app, db, "CREATE (:A)", col="one")
    rows(app, db, "CREATE (:A)", col="two")
    r = app.client.request("DELETE", "/byog/databases", json={"database": db}, headers=app.headers())
    assert r.status_code == 200
    assert r.json()["data"] == {
        "database": db,
        "cluster": "local",
        "deleted": True,
        "deleted_collections": ["one", "two"],
    }
    assert_fail(q(app, db, "RETURN 1"), 404, "DATABASE_NOT_FOUND")
    # the name can be reused and starts empty
    app.client.post("/byog/databases", json={"database": db}, headers=app.headers())
    assert rows(app, db, "MATCH (n) RETURN count(n) AS c", col="one") == [{"c": 0}]


# ---- values ------------------------------------------------------------------------------
def test_value_shapes(app: LocalApp) -> None:
    db = fresh_db(app)
    data = rows(
        app,
        db,
        "CREATE (a:Person:Admin {name: 'Ann', age: 40})-[r:KNOWS {since: 2020}]->(b:Person {name: 'Bob'}) "
        "RETURN a, r, b, a.name, a.age + 1, [1, 'x', null] AS list, {k: 1, n: b.name} AS map, 2.5 AS f, true AS t",
    )
    [row] = data
    assert row["a"] == {"name": "Ann", "age": 40, "id": row["a"]["id"], "labels": ["Person", "Admin"]}
    assert isinstance(row["a"]["id"], int)
    assert row["r"] == {
        "since": 2020,
        "id": row["r"]["id"],
        "relation": "KNOWS",
        "source_node_id": row["a"]["id"],
        "target_node_id": row["b"]["id"],
    }
    # unaliased columns keyed by expression text
    assert row["a.name"] == "Ann"
    assert row["a.age + 1"] == 41
    assert row["list"] == [1, "x", None] and row["map"] == {"k": 1, "n": "Bob"}
    assert row["f"] == 2.5 and row["t"] is True
    [prow] = rows(app, db, "MATCH p = (:Person {name: 'Ann'})-[:KNOWS]->(:Person) RETURN p")
    path = prow["p"]
    assert [n["name"] for n in path["nodes"]] == ["Ann", "Bob"]
    assert [e["relation"] for e in path["edges"]] == ["KNOWS"]
    assert path["edges"][0]["source_node_id"] == path["nodes"][0]["id"]


def test_reserved_property_names_hidden_unless_aliased(app: LocalApp) -> None:
    db = fresh_db(app)
    rows(
        app,
        db,
        "CREATE (a:N {id: 'mine', labels: 'L', relation: 'r', source_node_id: 's', target_node_id: 't', keep: 1})"
        "-[:R {id: 'edge-id', relation: 'x', keep: 2}]->(:N)",
    )
    [row] = rows(app, db, "MATCH (a:N {keep: 1})-[r]->() RETURN a, r, a.id AS a_id, r.id AS r_id, a.labels AS a_labels")
    assert isinstance(row["a"]["id"], int) and row["a"]["labels"] == ["N"]
    assert set(row["a"]) == {"id", "labels", "keep"}
    assert isinstance(row["r"]["id"], int) and row["r"]["relation"] == "R"
    assert set(row["r"]) == {"id", "relation", "source_node_id", "target_node_id", "keep"}
    assert row["a_id"] == "mine" and row["r_id"] == "edge-id" and row["a_labels"] == "L"


def test_64_bit_integers(app: LocalApp) -> None:
    db = fresh_db(app)
    big = 2**62 + 12345  # above 2^53: a double would round it
    [row] = rows(app, db, "RETURN $v AS v, 9223372036854775807 AS max, -9223372036854775808 AS min", {"v": big})
    assert row == {"v": big, "max": 2**63 - 1, "min": -(2**63)}
    rows(app, db, "CREATE (:N {v: $v})", {"v": big})
    assert rows(app, db, "MATCH (n:N) RETURN n.v AS v") == [{"v": big}]
    assert_fail(q(app, db, "RETURN $v", {"v": 2**64}), 400, "INVALID_PARAMETERS", "64-bit")


def test_params_are_data_not_query_text(app: LocalApp) -> None:
    db = fresh_db(app)
    nasty = "x'}) DETACH DELETE n // \" \\ `"
    rows(app, db, "CREATE (:Doc {title: $t, tags: $tags, meta: $m})", {"t": nasty, "tags": ["a", "b"], "m": None})
    assert rows(app, db, "MATCH (d:Doc) RETURN d.title AS t, d.tags AS tags") == [{"t": nasty, "tags": ["a", "b"]}]
    assert_fail(q(app, db, "RETURN $missing"), 400, "INVALID_PARAMETERS", "missing")
    assert_fail(q(app, db, "RETURN 1", {"bad name": 1}), 400, "INVALID_PARAMETERS")
    r = app.client.post(
        "/byog/query",
        json={"database": db, "collection": "c1", "query": "RETURN 1", "params": [1]},
        headers=app.headers(),
    )
    assert_fail(r, 400, "INVALID_PARAMETERS", "params")


def test_numeric_parameter_names(app: LocalApp) -> None:
    # openCypher allows `$1`; the engine only parses it quoted, so the service quotes it (tokens, not text)
    db = fresh_db(app)
    rows(app, db, "CREATE (:A {id: 1, v: 'one'}), (:A {id: 2, v: 'two'})")
    got = rows(app, db, "MATCH (a:A) WHERE a.id = $1 OR a.v = $`2` RETURN a.v AS v, '$1' AS s", {"1": 1, "2": "two"})
    assert sorted(r["v"] for r in got) == ["one", "two"] and got[0]["s"] == "$1"
    assert_fail(q(app, db, "RETURN $1 AS x"), 400, "INVALID_PARAMETERS", "$1")


def test_octal_literals_and_final_semicolon(app: LocalApp) -> None:
    # openCypher forms the engine's parser lacks; the service spells them in forms it knows
    db = fresh_db(app)
    assert rows(app, db, "RETURN 0o17 AS a, -0o1 AS b, [0o10] AS c;") == [{"a": 15, "b": -1, "c": [8]}]
    assert_fail(q(app, db, "CREATE (:A); MATCH (n) DETACH DELETE n"), 400, "INVALID_PARAMETERS", "one statement")


def test_sum_is_typed_as_opencypher_types_it(app: LocalApp) -> None:
    # The engine adds in doubles (sum of 1..5 answers 15.0); openCypher: integers sum to an integer.
    # Compared as JSON text, where 15 and 15.0 differ (in Python they are equal).
    db = fresh_db(app)

    def same(query: str, expected: list[dict[str, Any]]) -> None:
        assert json.dumps(rows(app, db, query)) == json.dumps(expected)

    rows(app, db, "UNWIND range(1, 5) AS i CREATE (:N {k: i % 2, x: i, f: i * 0.5})")
    rows(app, db, "CREATE (:N {k: 0})")  # no x: skipped like null
    same("MATCH (n:N) RETURN sum(n.x)", [{"sum(n.x)": 15}])
    same(
        "MATCH (n:N) RETURN sum(n.x) AS i, sum(n.f) AS f, sum(n.x + n.f) AS m, sum(n.x) * 2 AS d",
        [{"i": 15, "f": 7.5, "m": 22.5, "d": 30}],
    )
    same("UNWIND [1.0, 2.0] AS x RETURN sum(x) AS s", [{"s": 3.0}])  # a float sum stays a float even when whole
    same("UNWIND [1, 1, 2, null] AS x RETURN sum(DISTINCT x) AS s", [{"s": 3}])
    same("UNWIND [1, 1, 2.5] AS x RETURN sum(DISTINCT x) AS s", [{"s": 3.5}])
    same("MATCH (n:Missing) RETURN sum(n.x) AS s", [{"s": 0}])
    same("MATCH (n:N) RETURN n.k AS k, sum(n.x) ORDER BY k", [{"k": 0, "sum(n.x)": 6}, {"k": 1, "sum(n.x)": 9}])
    same("MATCH (n:N) WITH n.k AS k, sum(n.x) AS s ORDER BY s DESC LIMIT 1 RETURN k, s", [{"k": 1, "s": 9}])
    same("UNWIND range(1000000, 2000000) AS i WITH i LIMIT 3000 RETURN sum(i)", [{"sum(i)": 3004498500}])
    # not the aggregate: a property named sum, and text in strings
    same("CREATE (m:M {sum: 2}) RETURN m.sum AS v, 'sum(1)' AS t", [{"v": 2, "t": "sum(1)"}])
    assert_fail(q(app, db, "UNWIND ['a'] AS x RETURN sum(x)"), 400, "INVALID_PARAMETERS")


def test_deep_nesting_is_refused_before_it_reaches_the_engine(app: LocalApp) -> None:
    # The engine's parser doubles its work per nesting level and no timeout covers parsing: 40 levels never finish.
    db = fresh_db(app)
    started = time.monotonic()
    deep = "RETURN " + "[" * 40 + "]" * 40 + " AS x"
    assert_fail(q(app, db, deep), 400, "INVALID_PARAMETERS", "nests too deeply", "params")
    assert_fail(q(app, db, "RETURN " + "NOT " * 30 + "true AS x"), 400, "INVALID_PARAMETERS", "nests too deeply")
    assert time.monotonic() - started < 2
    assert rows(app, db, "RETURN " + "[" * 12 + "1" + "]" * 12 + " AS x") == [{"x": [[[[[[[[[[[[1]]]]]]]]]]]]}]


def test_compile_errors_are_400(app: LocalApp) -> None:
    db = fresh_db(app)
    assert_fail(q(app, db, "MATCH (n RETURN n"), 400, "INVALID_PARAMETERS")
    assert_fail(q(app, db, "   "), 400, "INVALID_PARAMETERS", "query")
    assert_fail(q(app, db, "RETURN 'unterminated"), 400, "INVALID_PARAMETERS", "unterminated")


# ---- rules enforced before execution ------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "advice"),
    [
        ("CALL db.labels()", "MATCH (n) RETURN DISTINCT labels(n)"),
        ("CALL db.labels() YIELD label RETURN label", "openCypher"),
        ("call apoc.help('x')", "apoc"),
        ("MATCH (n) CALL db.idx.fulltext.queryNodes('L', 'x') YIELD node RETURN node", "procedure"),
        ("CALL dbms.procedures", "procedure"),
        ("LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line", "params"),
        ("load csv with headers from 'https://x/y.csv' AS row RETURN row", "UNWIND $rows"),
        ("MATCH (n) WHERE EXISTS { (n)-->() } RETURN n", "pattern predicate"),
        ("MATCH (n) WHERE exists(n.name) RETURN n", "IS NOT NULL"),
        ("MATCH (n) RETURN {k: exists(n.name)} AS m", "IS NOT NULL"),
        ("MATCH (a), (b), p = shortestPath((a)-[*]->(b)) RETURN p", "RETURN or WITH"),
        ("MATCH p = allShortestPaths((a)-[*]->(b)) RETURN p", "RETURN or WITH"),
        ("MATCH (a {v: 1}), (b {v: 2}) RETURN shortestPath((a)-[*]-(b)) AS p", "directed"),
        ("MATCH (a {v: 1}), (b {v: 2}) WITH shortestPath((a)<-[*]->(b)) AS p RETURN p", "directed"),
    ],
)
def test_rejected_constructs(app: LocalApp, query: str, advice: str) -> None:
    db = fresh_db(app)
    rows(app, db, "CREATE (:X {v: 1})-[:R]->(:X {v: 2})")
    assert_fail(q(app, db, query), 400, "INVALID_PARAMETERS", advice)
    # nothing ran: still the same graph
    assert rows(app, db, "MATCH (n) RETURN count(n) AS c") == [{"c": 2}]


@pytest.mark.parametrize(
    "query",
    [
        "RETURN 'LOAD CSV FROM x' AS s",
        'RETURN "CALL db.labels()" AS s',
        "RETURN 'it\\'s EXISTS { x }' AS s",
        "RETURN 1 AS s // CALL db.labels() and LOAD CSV",
        "RETURN /* CALL db.labels() */ 1 AS s",
        "MATCH (n:X) RETURN n.v AS `CALL db.labels()` ORDER BY n.v LIMIT 1",
        "WITH {exists: 1} AS m RETURN m.exists AS s",
    ],
)
def test_text_in_strings_and_comments_is_not_screened(app: LocalApp, query: str) -> None:
    db = fresh_db(app)
    rows(app, db, "CREATE (:X {v: 1})")
    assert len(rows(app, db, query)) == 1


def test_allowed_subquery_and_directed_shortest_path(app: LocalApp) -> None:
    db = fresh_db(app)
    rows(app, db, "CREATE (:S {v: 1})-[:R]->(:S {v: 2})-[:R]->(:S {v: 3})")
    assert rows(app, db, "CALL { MATCH (n:S) RETURN count(n) AS c } RETURN c") == [{"c": 3}]
    [row] = rows(app, db, "MATCH (a:S {v: 1}), (b:S {v: 3}) RETURN shortestPath((a)-[:R*]->(b)) AS p")
    assert [n["v"] for n in row["p"]["nodes"]] == [1, 2, 3] and len(row["p"]["edges"]) == 2
    assert rows(app, db, "MATCH (n:S) WHERE (n)-[:R]->() RETURN n.v AS v ORDER BY v") == [{"v": 1}, {"v": 2}]
    rows(app, db, "CREATE INDEX FOR (n:S) ON (n.v)")
    assert rows(app, db, "MATCH (a:S {v: 1})-[:R*1..2]->(b) RETURN b.v AS v ORDER BY v") == [{"v": 2}, {"v": 3}]


def test_merge_retries_are_safe(app: LocalApp) -> None:
    db = fresh_db(app)
    stmt = "MERGE (a:U {email: $e}) MERGE (b:U {email: $f}) MERGE (a)-[:FOLLOWS]->(b)"
    for _ in range(3):
        assert rows(app, db, stmt, {"e": "a@x", "f": "b@x"}) == []
    assert rows(app, db, "MATCH (n:U) RETURN count(n) AS c") == [{"c": 2}]
    assert rows(app, db, "MATCH ()-[r:FOLLOWS]->() RETURN count(r) AS c") == [{"c": 1}]


# ---- DELETE of a connected node: the openCypher error, not the engine's silent cascade ------
def test_plain_delete_of_connected_node_is_refused_without_writing(app: LocalApp) -> None:
    db = fresh_db(app)
    rows(app, db, "CREATE (:P {n: 1})-[:R]->(:P {n: 2}), (:P {n: 3})")
    assert_fail(q(app, db, "MATCH (p:P {n: 1}) DELETE p"), 400, "INVALID_PARAMETERS", "DETACH DELETE")
    assert_fail(q(app, db, "MATCH (a:P {n: 3}), (b:P {n: 1}) DELETE a, b"), 400, "INVALID_PARAMETERS")
    assert_fail(
        q(app, db, "MATCH (a:P {n: 3}), (b:P {n: 2}) WITH a, b ORDER BY a.n DELETE a, b"), 400, "INVALID_PARAMETERS"
    )
    # nothing changed
    assert rows(app, db, "MATCH (p:P) RETURN count(p) AS c, count(p.touched) AS t") == [{"c": 3, "t": 0}]
    assert rows(app, db, "MATCH ()-[r]->() RETURN count(r) AS c") == [{"c": 1}]
    # an unconnected node deletes fine, and so does the node with its relationship in the same clause
    assert rows(app, db, "MATCH (p:P {n: 3}) DELETE p") == []
    assert rows(app, db, "MATCH (p:P {n: 1})-[r]->() DELETE r, p") == []
    assert rows(app, db, "MATCH (p:P) RETURN p.n AS n") == [{"n": 2}]
    rows(app, db, "CREATE (:Q)-[:R]->(:Q)-[:R]->(:Q)")
    assert rows(app, db, "MATCH p = (:Q)-[:R]->(:Q)-[:R]->(:Q) DELETE p") == []
    rows(app, db, "CREATE (:D)-[:R]->(:D)")
    assert rows(app, db, "MATCH (d:D) DETACH DELETE d") == []
    assert rows(app, db, "MATCH (n) RETURN count(n) AS c") == [{"c": 1}]


# ---- limits --------------------------------------------------------------------------------
def test_body_over_256_kib_is_413(app: LocalApp) -> None:
    db = fresh_db(app)
    big = "x" * (256 * 1024)
    r = q(app, db, "RETURN $s AS s", {"s": big})
    assert_fail(r, 413, "PAYLOAD_TOO_LARGE", "256 KiB")
    ok = q(app, db, "RETURN size($s) AS n", {"s": "y" * (200 * 1024)})
    assert ok.status_code == 200 and ok.json()["data"] == [{"n": 200 * 1024}]
    # the limit is on bytes sent, whatever the content type says
    raw = b'{"database": "' + db.encode() + b'", "padding": "' + b"z" * (300 * 1024) + b'"}'
    r = app.client.post("/byog/databases", content=raw, headers=app.headers(**{"Content-Type": "text/plain"}))
    assert_fail(r, 413, "PAYLOAD_TOO_LARGE")


def test_slow_read_stops_with_advice(app: LocalApp) -> None:
    db = fresh_db(app)
    rows(app, db, "UNWIND range(1, 3000) AS i CREATE (:N {i: i})")
    started = time.monotonic()
    r = q(app, db, "MATCH (a:N), (b:N), (c:N) WHERE a.i + b.i + c.i = -1 RETURN a")
    elapsed = time.monotonic() - started
    assert_fail(r, 400, "INVALID_PARAMETERS", "LIMIT", "index", "simpler")
    assert "1 s" in r.json()["error"]["message"] and "read" in r.json()["error"]["message"]
    assert elapsed < 5


def test_slow_write_is_stopped_and_rolled_back(app: LocalApp) -> None:
    db = fresh_db(app)
    rows(app, db, "UNWIND range(1, 3000) AS i CREATE (:N {i: i})")
    r = q(app, db, "MATCH (a:N), (b:N), (c:N) WHERE a.i + b.i + c.i = -1 CREATE (:Bad)")
    assert_fail(r, 400, "INVALID_PARAMETERS", "write", "LIMIT")
    assert rows(app, db, "MATCH (n:Bad) RETURN count(n) AS c") == [{"c": 0}]


def test_rows_beyond_cap_are_dropped_silently(app: LocalApp) -> None:
    db = fresh_db(app)
    data = rows(app, db, "UNWIND range(1, 1000) AS x RETURN x")
    assert [r["x"] for r in data] == list(range(1, MAX_ROWS + 1))
    # paginate with ORDER BY ... SKIP ... LIMIT
    page = rows(app, db, "UNWIND range(1, 1000) AS x RETURN x ORDER BY x SKIP 100 LIMIT 100")
    assert [r["x"] for r in page] == list(range(101, 201))


def test_defaults_follow_the_spec(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path)
    assert (s.byog.max_rows, s.byog.read_timeout_ms, s.byog.write_timeout_ms) == (10000, 8000, 30000)
    la = make_app(tmp_path / "d")
    try:
        byog = la.services.byog
        assert byog is not None
        assert (byog.max_rows, byog.read_timeout_ms, byog.write_timeout_ms, byog.cluster) == (
            10000,
            8000,
            30000,
            "local",
        )
    finally:
        la.close()


def test_cap_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSTORE_BYOG_MAX_ROWS", "7")
    assert Settings(data_dir=tmp_path).byog.max_rows == 7
