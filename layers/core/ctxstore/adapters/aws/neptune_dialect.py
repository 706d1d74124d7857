"""Neptune's openCypher dialect: the constructs AWS documents as unsupported or different, found on tokens.

FalkorDB, the local engine, accepts all of these, so a query that works locally can fail on Neptune
Analytics. ``check(query, params)`` lists what a query (and its parameters) does that Neptune documents
as unsupported; the adapter runs it on the user Cypher of BYOG collections, and the AWS tests run it on
every query the adapter sends (their fake ExecuteQuery refuses a query with findings, as Neptune would).
It lives beside the adapter, not in the tests, because the adapter needs it at run time for user Cypher.

Sources (AWS documentation, as stored by the project's search tool):

* *openCypher specification compliance in Amazon Neptune* (neptune/latest/userguide/
  feature-opencypher-compliance.html), "Support for openCypher clauses in Neptune":
  ``MATCH`` "Supported, except that shortestPath() and allShortestPaths() are not currently supported";
  ``MANDATORY MATCH`` "is not currently supported"; ``RETURN``/``WITH`` "Supported, except when used
  with non-static values for SKIP or LIMIT" (the example is ``LIMIT toInteger(rand())``);
  ``CALL[YIELD...]`` "is not currently supported"; ``UNION, UNION ALL`` "read-only queries are
  supported, but mutation queries are not currently supported". The list of supported clauses has no
  ``FOREACH``, ``LOAD CSV``, ``USE`` or ``CALL { }`` subquery. Operators: the ``^`` exponentiation
  operator "is NOT supported".
* *Neptune Analytics openCypher specification compliance* (neptune-analytics/latest/userguide/
  query-openCypher-standards-compliance.html): the Neptune Database page applies, "with the exception
  that Neptune Analytics does not support custom edge IDs. Custom IDs are not permitted in CREATE or
  MERGE clauses"; the same page documents ``reduce()`` for Neptune Analytics. Neptune Analytics runs
  its algorithms as ``CALL neptune.algo.*`` procedures.
* *Rewriting Cypher queries to run in openCypher on Neptune* (neptune/latest/userguide/
  migration-opencypher-rewrites.html): "Rewriting None, All, and Any predicate functions: These
  functions are not part of the openCypher specification. Comparable results can be achieved in
  openCypher using List Comprehension" (``any`` => ``size([x IN list WHERE ...]) >= 1``); "The
  reduce() function is not part of the openCypher specification" (Neptune Database; see above).
* *openCypher data model* (neptune/latest/userguide/access-graph-opencypher-data-model.html): the
  property types are Bool, Byte, Short, Int, Long, Float, Double, DateTime and String; an array
  property value is treated "as a set of multi-valued properties instead of as a single list value".
  So a list (or map) written as a property does not read back as it was written.
* *openCypher extensions in Amazon Neptune*: ``SET n = removeKeyFromMap(val, '~id')`` shows that
  ``SET n = <map>`` is supported; user-defined functions and procedures (``apoc.*``, ``gds.*``,
  ``db.*``) are not Neptune's. Neptune indexes every property itself and has no index or constraint
  statements (*Neptune compatibility with Neo4j*).

Not flagged, because the pages do not list them as exceptions to openCypher 9: pattern predicates in
WHERE (``WHERE NOT (e)--()``), list comprehensions and slices, ``startNode()``/``endNode()``, map
projections. Comparisons of lists, maps and paths with ``<``/``>`` are unsupported too, but types are
not known from tokens. Parameters in SKIP/LIMIT: the pages call only "static" values supported and do
not say a parameter is one, so the checker asks for an integer literal and the adapter writes integer
parameters of SKIP/LIMIT into the text before sending (``inline_skip_limit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ctxstore.services.byog.cypher_lexer import Kind, LexError, Token, tokenize

Engine = Literal["analytics", "database"]

COMPLIANCE = "openCypher specification compliance in Amazon Neptune"
ANALYTICS = "Neptune Analytics openCypher specification compliance"
REWRITES = "Rewriting Cypher queries to run in openCypher on Neptune"
DATA_MODEL = "openCypher data model (Neptune)"

_CLAUSES = {
    "MATCH", "OPTIONAL", "WITH", "RETURN", "UNWIND", "CREATE", "MERGE", "SET", "DELETE", "DETACH",
    "REMOVE", "FOREACH", "CALL", "UNION", "ORDER", "SKIP", "LIMIT", "WHERE", "LOAD", "DROP", "ON", "USE",
    "MANDATORY", "YIELD",
}  # fmt: skip
_WRITES = {"CREATE", "MERGE", "SET", "DELETE", "REMOVE", "FOREACH", "DROP"}
_LIST_PREDICATES = {"ANY", "ALL", "NONE", "SINGLE"}
_NOT_OPENCYPHER_FUNCTIONS = {"TYPEOF", "ELEMENTID"}  # FalkorDB's / Neo4j 5's, in no Neptune page
_SCALARS = (str, bool, int, float)


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    offset: int

    def __str__(self) -> str:
        return f"{self.message} (at offset {self.offset}; {self.rule})"


def _sym(t: Token | None, *syms: str) -> bool:
    return t is not None and t.kind is Kind.SYMBOL and t.text in syms


def _at(tokens: list[Token], i: int) -> Token | None:
    return tokens[i] if 0 <= i < len(tokens) else None


def _keyword(tokens: list[Token], i: int, *words: str) -> bool:
    """tokens[i] is one of `words` used as a keyword: not a property key (`n.limit`), map key (`{limit: 1}`),
    label or type (`:Call`) or alias (`AS limit`)."""
    t = tokens[i]
    if not t.is_kw(*words):
        return False
    prev = _at(tokens, i - 1)
    return (
        not _sym(prev, ".", ":") and not _sym(_at(tokens, i + 1), ":") and not (prev is not None and prev.is_kw("AS"))
    )


def _call(tokens: list[Token], i: int, *names: str) -> bool:
    """tokens[i] names a (non-namespaced) function called here: `name(`."""
    return (
        tokens[i].kind is Kind.IDENT
        and tokens[i].text.upper() in names
        and _sym(_at(tokens, i + 1), "(")
        and not _sym(_at(tokens, i - 1), ".")
    )


def _dotted_before(tokens: list[Token], i: int) -> str:
    """The dotted name ending at tokens[i] (`apoc.coll.sum` for the `sum` of `apoc.coll.sum(`)."""
    parts = [tokens[i].text]
    j = i
    while (
        _sym(_at(tokens, j - 1), ".") and (p := _at(tokens, j - 2)) is not None and p.kind in (Kind.IDENT, Kind.QIDENT)
    ):
        parts.insert(0, p.text)
        j -= 2
    return ".".join(parts)


def _called(tokens: list[Token], i: int) -> bool:
    """tokens[i] is the CALL keyword of a procedure call (reported by the CALL rule, not twice)."""
    return i >= 0 and _keyword(tokens, i, "CALL")


def _dotted_after(tokens: list[Token], i: int) -> str:
    parts: list[str] = []
    while (t := _at(tokens, i)) is not None and (t.kind in (Kind.IDENT, Kind.QIDENT) or _sym(t, ".")):
        parts.append(t.text)
        i += 1
    return "".join(parts)


def check(query: str, params: Mapping[str, Any] | None = None, *, engine: Engine = "analytics") -> list[Finding]:
    """What `query` (run with `params`) does that Neptune documents as unsupported or different."""
    try:
        tokens = tokenize(query)
    except LexError as exc:
        return [Finding("syntax", f"the query could not be read: {exc}", exc.pos)]
    out: list[Finding] = []
    is_write = any(_keyword(tokens, i, *_WRITES) for i in range(len(tokens)))
    clause = ""
    for i, t in enumerate(tokens):
        if t.kind is Kind.IDENT and _keyword(tokens, i, *_CLAUSES):
            clause = t.text.upper()
        at = _At(tokens, i, engine, is_write, clause)
        finding = _function_finding(at) or _clause_finding(at) or _operator_finding(at)
        if finding is not None:
            out.append(finding)
    out.extend(_property_values(tokens, dict(params or {})))
    return out


@dataclass(frozen=True)
class _At:
    """One token of the query with what the rules need around it."""

    tokens: list[Token]
    i: int
    engine: Engine
    is_write: bool
    clause: str

    @property
    def t(self) -> Token:
        return self.tokens[self.i]

    @property
    def nxt(self) -> Token | None:
        return _at(self.tokens, self.i + 1)


def _function_finding(at: _At) -> Finding | None:
    tokens, i, t = at.tokens, at.i, at.t
    if _call(tokens, i, *_LIST_PREDICATES) and _is_list_predicate(tokens, i + 1):
        return Finding(
            REWRITES,
            f"{t.text}(x IN list WHERE ...) is not openCypher on Neptune; write it as a list comprehension, "
            "e.g. size([x IN list WHERE ...]) > 0 for any(), = 0 for none(), = size(list) for all()",
            t.start,
        )
    if _call(tokens, i, "REDUCE") and at.engine == "database":
        return Finding(REWRITES, "reduce() is not openCypher on Neptune Database", t.start)
    if _call(tokens, i, "SHORTESTPATH", "ALLSHORTESTPATHS"):
        return Finding(COMPLIANCE, f"{t.text}() is not supported on Neptune", t.start)
    if _call(tokens, i, *_NOT_OPENCYPHER_FUNCTIONS):
        return Finding(COMPLIANCE, f"{t.text}() is not an openCypher function Neptune knows", t.start)
    if (
        t.kind is Kind.IDENT
        and _sym(at.nxt, "(")
        and _sym(_at(tokens, i - 1), ".")
        and not (name := _dotted_before(tokens, i)).lower().startswith("neptune.")
        and not _called(tokens, i - 2 * name.count(".") - 1)
    ):
        return Finding(COMPLIANCE, f"{name}() is a user-defined function, which Neptune does not have", t.start)
    return None


def _clause_finding(at: _At) -> Finding | None:
    tokens, i, t, nxt = at.tokens, at.i, at.t, at.nxt
    if _keyword(tokens, i, "SKIP", "LIMIT") and not _static_count(tokens, i + 1):
        return Finding(
            COMPLIANCE,
            f"{t.text.upper()} takes a static value on Neptune: write an integer literal "
            "(a parameter is not documented as static; the adapter inlines integer parameters)",
            t.start,
        )
    if _keyword(tokens, i, "CALL"):
        name = _dotted_after(tokens, i + 1)
        if at.engine == "analytics" and name.lower().startswith("neptune."):
            return None
        what = "CALL { } subqueries are" if _sym(nxt, "{", "(") else f"CALL {name or '?'} is"
        return Finding(
            COMPLIANCE, f"{what} not supported on Neptune (only Neptune Analytics' neptune.* procedures)", t.start
        )
    if _keyword(tokens, i, "MANDATORY"):
        return Finding(COMPLIANCE, "MANDATORY MATCH is not supported on Neptune", t.start)
    if _keyword(tokens, i, "UNION") and at.is_write:
        return Finding(COMPLIANCE, "UNION in a query that writes is not supported on Neptune", t.start)
    if _keyword(tokens, i, "FOREACH", "USE") or (_keyword(tokens, i, "LOAD") and nxt is not None and nxt.is_kw("CSV")):
        return Finding(COMPLIANCE, f"{t.text.upper()} is not among the clauses Neptune supports", t.start)
    if (
        _keyword(tokens, i, "CREATE", "DROP")
        and nxt is not None
        and nxt.is_kw("INDEX", "CONSTRAINT", "RANGE", "TEXT", "FULLTEXT", "POINT", "VECTOR", "LOOKUP")
    ):
        return Finding(COMPLIANCE, "Neptune has no index or constraint statements (it indexes every property)", t.start)
    return None


def _operator_finding(at: _At) -> Finding | None:
    t = at.t
    if _sym(t, "^"):
        return Finding(COMPLIANCE, "the ^ exponentiation operator is not supported on Neptune", t.start)
    if (
        t.kind is Kind.QIDENT
        and t.text == "~id"
        and at.clause in ("CREATE", "MERGE")
        and _in_relationship(at.tokens, at.i)
    ):
        return Finding(ANALYTICS, "Neptune Analytics does not allow custom edge ids in CREATE or MERGE", t.start)
    return None


def _is_list_predicate(tokens: list[Token], i: int) -> bool:
    """`(x IN ...`: the list-predicate form, not a user's `any` variable or function of another shape."""
    return (
        (v := _at(tokens, i + 1)) is not None
        and v.kind in (Kind.IDENT, Kind.QIDENT)
        and (k := _at(tokens, i + 2)) is not None
        and k.is_kw("IN")
    )


def _static_count(tokens: list[Token], i: int) -> bool:
    """SKIP/LIMIT followed by one integer literal and nothing that extends the expression."""
    t = _at(tokens, i)
    if t is None or t.kind is not Kind.NUMBER or not t.text.isdigit():
        return False
    after = _at(tokens, i + 1)
    return after is None or after.kind is Kind.IDENT or _sym(after, ")", "}", ";")


def _in_relationship(tokens: list[Token], i: int) -> bool:
    """tokens[i] sits inside a `[...]` that follows a `-` (a relationship pattern)."""
    depth = 0
    for j in range(i - 1, -1, -1):
        t = tokens[j]
        if _sym(t, "]", ")", "}"):
            depth += 1
        elif _sym(t, "[", "(", "{"):
            if depth == 0:
                if t.text == "[":
                    return _sym(_at(tokens, j - 1), "-", "<-")
                if t.text == "(":
                    return False
            else:
                depth -= 1
    return False


# ---- property values: lists and maps are not property types on Neptune ---------------------------
def _property_values(tokens: list[Token], params: dict[str, Any]) -> list[Finding]:
    """Values a write stores as properties, resolved through the parameters: `SET v.k = $p`, `SET v = $p`,
    `SET v += $p`, `{k: $p}` in CREATE/MERGE patterns, and the same with `row.field` or `row` of an
    `UNWIND $rows AS row`."""
    rows: dict[str, list[Any]] = {}
    for i in range(len(tokens)):
        if _keyword(tokens, i, "UNWIND") and (p := _at(tokens, i + 1)) is not None and p.kind is Kind.PARAM:
            a, v = _at(tokens, i + 2), _at(tokens, i + 3)
            if a is not None and a.is_kw("AS") and v is not None and isinstance(params.get(p.text), list):
                rows[v.text] = list(params[p.text])
    out: list[Finding] = []
    clause = ""
    for i, t in enumerate(tokens):
        if t.kind is Kind.IDENT and _keyword(tokens, i, *_CLAUSES):
            clause = t.text.upper()
            continue
        if clause == "SET" and _sym(t, "=", "+="):
            whole = not _sym(_at(tokens, i - 2), ".")  # `v = ...` / `v += ...` rather than `v.k = ...`
            for value in _values(tokens, i + 1, params, rows):
                out.extend(_bad(value, whole=whole, offset=t.start))
        elif clause in ("CREATE", "MERGE") and _sym(t, ":") and _sym(_at(tokens, i - 2), "{", ","):
            for value in _values(tokens, i + 1, params, rows):
                out.extend(_bad(value, whole=False, offset=t.start))
    return out


def _values(tokens: list[Token], i: int, params: dict[str, Any], rows: dict[str, list[Any]]) -> list[Any]:
    """The value(s) of a one-term expression at tokens[i]: `$p`, `row`, `row.field`; [] when not resolvable."""
    t = _at(tokens, i)
    if t is None:
        return []
    after = _at(tokens, i + 1)

    def ended(tok: Token | None) -> bool:
        return tok is None or _sym(tok, ",", ")", "}") or tok.kind is Kind.IDENT

    if t.kind is Kind.PARAM and ended(after) and t.text in params:
        return [params[t.text]]
    if t.kind is Kind.IDENT and t.text in rows:
        if ended(after):
            return rows[t.text]
        field = _at(tokens, i + 2)
        if _sym(after, ".") and field is not None and ended(_at(tokens, i + 3)):
            return [r.get(field.text) for r in rows[t.text] if isinstance(r, dict)]
    return []


def _bad(value: Any, *, whole: bool, offset: int) -> list[Finding]:
    if whole:  # a map of properties
        if value is None:
            return []
        if not isinstance(value, dict):
            return [Finding(DATA_MODEL, "SET v = ... needs a map of properties", offset)]
        return [f for v in value.values() for f in _bad(v, whole=False, offset=offset)]
    if value is None or isinstance(value, _SCALARS):
        return []
    if isinstance(value, list):
        return [
            Finding(
                DATA_MODEL,
                "a list property value: Neptune stores it as a multi-valued set, not a list "
                "(order and duplicates are lost); store a string (e.g. joined) instead",
                offset,
            )
        ]
    return [Finding(DATA_MODEL, f"a {type(value).__name__} is not a Neptune property type", offset)]


def inline_skip_limit(query: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """`SKIP $n` / `LIMIT $n` with an integer parameter written as the literal (Neptune takes static values
    there, see the module doc); parameters no longer used are dropped. Anything else is left as it is."""
    try:
        tokens = tokenize(query)
    except LexError:
        return query, dict(params)
    edits: list[tuple[Token, str]] = []
    for i in range(len(tokens)):
        p = _at(tokens, i + 1)
        if _keyword(tokens, i, "SKIP", "LIMIT") and p is not None and p.kind is Kind.PARAM:
            value = params.get(p.text)
            if type(value) is int and value >= 0:
                edits.append((p, str(value)))
    if not edits:
        return query, dict(params)
    out: list[str] = []
    pos = 0
    for t, text in edits:
        out += [query[pos : t.start], text]
        pos = t.end
    out.append(query[pos:])
    edited = {id(t) for t, _ in edits}
    still = {t.text for t in tokens if t.kind is Kind.PARAM and id(t) not in edited}
    inlined = {t.text for t, _ in edits} - still
    return "".join(out), {k: v for k, v in params.items() if k not in inlined}
