"""The token-level screen of BYOG queries: keywords only outside strings, comments and names."""

from __future__ import annotations

import pytest

from ctxstore.services.byog.cypher_cost import MAX_PARSE_COST, parse_cost
from ctxstore.services.byog.cypher_lexer import Kind, LexError, tokenize
from ctxstore.services.byog.cypher_screen import QueryRejected, screen


def test_lexer_strings_escapes_backticks_comments_params() -> None:
    toks = tokenize(
        "MATCH (n:`odd``name`) WHERE n.s = 'it\\'s \"q\"' // CALL x()\n/* LOAD CSV */ RETURN $p, $`a b`, 1.5e3"
    )
    kinds = [(t.kind, t.text) for t in toks]
    assert (Kind.QIDENT, "odd`name") in kinds
    assert (Kind.STRING, 'it\'s "q"') in kinds
    assert (Kind.PARAM, "p") in kinds and (Kind.PARAM, "a b") in kinds
    assert (Kind.NUMBER, "1.5e3") in kinds
    assert not any(t.text.upper() in ("CALL", "LOAD") for t in toks)
    assert [t.text for t in tokenize("[1..2]")] == ["[", "1", "..", "2", "]"]


@pytest.mark.parametrize("src", ["RETURN 'x", "RETURN `x", "RETURN 1 /* x", "RETURN 'a\\"])
def test_lexer_rejects_unterminated(src: str) -> None:
    with pytest.raises(LexError):
        tokenize(src)


@pytest.mark.parametrize(
    ("query", "write"),
    [
        ("MATCH (n) RETURN n", False),
        ("MATCH (n) RETURN n // CREATE (m)", False),
        ("RETURN 'SET x = 1' AS s", False),
        ("MATCH (n:Create)-[:DELETE]->(m:Set) RETURN n.merge, {set: 1}", False),
        ("CREATE (n)", True),
        ("match (n) set n.x = 1", True),
        ("MERGE (n:A)", True),
        ("MATCH (n) DETACH DELETE n", True),
        ("MATCH (n) REMOVE n.x", True),
        ("FOREACH (x IN [1] | CREATE ())", True),
        ("CREATE INDEX FOR (n:A) ON (n.x)", True),
    ],
)
def test_write_detection(query: str, write: bool) -> None:
    assert screen(query).is_write is write


@pytest.mark.parametrize(
    "query",
    [
        "CALL db.labels()",
        "CALL apoc.create.node(['A'], {})",
        "MATCH (n) WITH n CALL db.idx.fulltext.queryNodes('A', 'x') YIELD node RETURN node",
        "LOAD CSV FROM 'x' AS l RETURN l",
        "MATCH (n) WHERE EXISTS { MATCH (n)-->() } RETURN n",
        "MATCH (n) WHERE exists(n.p) RETURN n",
        "MATCH p = shortestPath((a)-[*]->(b)) RETURN p",
        "OPTIONAL MATCH p = allShortestPaths((a)-[*]->(b)) RETURN p",
        "MATCH (a), (b) RETURN shortestPath((a)-[*]-(b))",
    ],
)
def test_rejected(query: str) -> None:
    with pytest.raises(QueryRejected):
        screen(query)


@pytest.mark.parametrize(
    "query",
    [
        "CALL { MATCH (n) RETURN n } RETURN n",
        "MATCH (n:Call) WHERE n:Load RETURN n.exists AS e",
        "RETURN 'CALL db.labels()' AS s",
        "MATCH (a), (b) RETURN shortestPath((a)-[:R*]->(b)) AS p",
        "MATCH (a), (b) WITH shortestPath((a)<-[:R*]-(b)) AS p RETURN p",
    ],
)
def test_allowed(query: str) -> None:
    screen(query)


def test_delete_check_plan() -> None:
    s = screen("MATCH (a)-[r]->(b) WHERE a.x = 'DELETE' DELETE r, a RETURN count(*)")
    assert s.delete_check is not None and s.delete_check.items == ["r", "a"]
    assert s.delete_check.prefix.strip() == "MATCH (a)-[r]->(b) WHERE a.x = 'DELETE'"
    assert screen("MATCH (a) DETACH DELETE a").delete_check is None
    after_write = screen("CREATE (a) WITH a DELETE a")
    assert after_write.delete_check is None and after_write.unchecked_delete


def test_numeric_parameters_are_quoted_for_the_engine() -> None:
    s = screen("MATCH (n) WHERE n.a = $1 AND n.b = $`2` AND n.c = $x RETURN '$3' AS s // $4")
    assert s.query == "MATCH (n) WHERE n.a = $`1` AND n.b = $`2` AND n.c = $x RETURN '$3' AS s // $4"
    assert s.params_used == {"1", "2", "x"}
    plain = "RETURN $a AS a"
    assert screen(plain).query is plain


def _nested(depth: int) -> str:
    return "RETURN " + "[" * depth + "]" * depth + " AS x"


@pytest.mark.parametrize(
    "query",
    [
        _nested(21),
        _nested(40),
        "RETURN " + "NOT " * 22 + "true AS x",
        "RETURN " + "- " * 22 + "1 AS x",
        "RETURN " + "CASE WHEN true THEN " * 20 + "1" + " END" * 20 + " AS x",
        "RETURN [" + ", ".join([_nested(19)[7:-5]] * 4) + "] AS x",  # several deep siblings add up
    ],
)
def test_queries_the_engine_parser_cannot_finish_in_budget_are_rejected(query: str) -> None:
    with pytest.raises(QueryRejected, match="nests too deeply"):
        screen(query)


@pytest.mark.parametrize(
    "query",
    [
        _nested(20),  # the TCK's deepest literal with an answer (Literals7 [11])
        "MATCH (a:P {name: $n})-[:KNOWS*1..3]->(b) WHERE NOT a.x = 1 AND NOT (b.y > -1) AND NOT b:Q "
        "RETURN [x IN collect(b.v) WHERE x > 0 | {v: x, w: CASE WHEN x > 1 THEN [x, -x] ELSE [] END}] AS out",
        "UNWIND $rows AS row CREATE (:Item {" + ", ".join(f"p{i}: row.p{i}" for i in range(200)) + "})",
        "WHERE " + " AND ".join(["NOT n.x = -1"] * 300),
    ],
)
def test_ordinary_and_tck_queries_are_not_costly(query: str) -> None:
    assert parse_cost(tokenize(query)) <= MAX_PARSE_COST


def test_octal_literals_and_a_final_semicolon_are_spelled_for_the_engine() -> None:
    s = screen("RETURN 0o17 AS a, -0o777777777777777777777 AS b, '0o17' AS c, 0x1F AS d;")
    assert s.query == "RETURN 15 AS a, -9223372036854775807 AS b, '0o17' AS c, 0x1F AS d"
    assert screen("RETURN ';' AS s // ;").query == "RETURN ';' AS s // ;"
    with pytest.raises(QueryRejected, match="one statement"):
        screen("CREATE (a); MATCH (n) DETACH DELETE n")


def _typed(arg: str, fn: str = "sum", distinct: str = "") -> str:
    inner = f"{fn}({distinct}{arg})"
    return f"CASE min(typeOf({arg})) WHEN 'Float' THEN {inner} ELSE toInteger({inner}) END"


def test_sum_is_typed_for_the_engine_and_unaliased_columns_keep_their_name() -> None:
    # The engine adds in doubles: every aggregate sum() gets openCypher's typing (ints -> int, any float -> float).
    assert screen("MATCH (n) RETURN n.k, sum(n.x)").query == f"MATCH (n) RETURN n.k, {_typed('n.x')} AS `sum(n.x)`"
    assert screen("MATCH (n) RETURN SUM( DISTINCT n.x ) AS s").query == (
        f"MATCH (n) RETURN {_typed('n.x', 'SUM', 'DISTINCT ')} AS s"
    )
    assert screen("MATCH (n) WITH n.k AS k, sum(n.a + 1) AS s RETURN k, s").query == (
        f"MATCH (n) WITH n.k AS k, {_typed('n.a + 1')} AS s RETURN k, s"
    )
    assert screen("UNWIND [1] AS x RETURN DISTINCT sum(x) * 2, {t: sum(x)} AS m").query == (
        f"UNWIND [1] AS x RETURN DISTINCT {_typed('x')} * 2 AS `sum(x) * 2`, {{t: {_typed('x')}}} AS m"
    )
    # a column named with a backtick keeps it
    assert screen("RETURN sum(x.`a``b`)").query.endswith(" AS `sum(x.``a````b``)`")


@pytest.mark.parametrize(
    "query",
    [
        "MATCH (n) RETURN n.sum, n.sum + 1 AS s",  # a property
        "RETURN `sum`(1) AS s",  # a backquoted name is a name, not the aggregate
        "RETURN 'sum(x)' AS s // sum(y)\n",  # strings and comments are data
        "RETURN ns.sum(1) AS s",  # another namespace's function
        "MATCH (n:sum {sum: 1}) RETURN n",
    ],
)
def test_sum_rewrite_leaves_what_is_not_the_aggregate(query: str) -> None:
    assert screen(query).query == query
