"""The BYOG rules a query must pass before it reaches the engine (spec: Graph database, rules 8-11).

Everything here works on tokens from `cypher_lexer`, so a string literal or a comment
that happens to contain `LOAD CSV` or `CALL db.labels()` is just data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxstore.services.byog.cypher_cost import MAX_PARSE_COST, parse_cost
from ctxstore.services.byog.cypher_lexer import Kind, LexError, Token, tokenize
from ctxstore.services.byog.cypher_sum import typed_sums

WRITE_KEYWORDS = ("CREATE", "MERGE", "SET", "DELETE", "REMOVE", "FOREACH", "DROP")
CLAUSE_KEYWORDS = (
    "MATCH",
    "OPTIONAL",
    "WITH",
    "RETURN",
    "UNWIND",
    "CREATE",
    "MERGE",
    "SET",
    "DELETE",
    "DETACH",
    "REMOVE",
    "FOREACH",
    "CALL",
    "UNION",
    "ORDER",
    "SKIP",
    "LIMIT",
    "WHERE",
    "LOAD",
    "DROP",
)


class QueryRejected(ValueError):
    """The query breaks a rule; the message says what to do instead."""


@dataclass
class DeleteCheck:
    """A plain DELETE whose targets can be checked before running: the read-only part before it and its items."""

    prefix: str
    items: list[str]


@dataclass
class Screened:
    query: str  # the text to send: the caller's, with `$1`, `0o` octals, a final ';' and sum() spelled for the engine
    tokens: list[Token]
    is_write: bool
    delete_check: DeleteCheck | None = None
    unchecked_delete: bool = False  # a plain DELETE whose targets could not be pre-checked
    params_used: set[str] = field(default_factory=set)


def _prev(tokens: list[Token], i: int) -> Token | None:
    return tokens[i - 1] if i > 0 else None


def _next(tokens: list[Token], i: int) -> Token | None:
    return tokens[i + 1] if i + 1 < len(tokens) else None


def _is_sym(t: Token | None, *syms: str) -> bool:
    return t is not None and t.kind is Kind.SYMBOL and t.text in syms


def _keyword_at(tokens: list[Token], i: int) -> bool:
    """An IDENT in keyword position: not a property key (`n.set`), a map key (`{set: 1}`) or a label or
    relationship type (`(n:Create)`, `[:DELETE]`, `n:Call`). A map value (`{k: exists(x)}`) is one."""
    t = tokens[i]
    if t.kind is not Kind.IDENT:
        return False
    prev = _prev(tokens, i)
    if _is_sym(prev, "."):
        return False
    if _is_sym(_next(tokens, i), ":") and _is_sym(prev, "{", ","):
        return False
    if _is_sym(prev, ":"):
        # `{key: value}`: the token two back is a key preceded by '{' or ','
        key = tokens[i - 2] if i >= 2 else None
        before_key = tokens[i - 3] if i >= 3 else None
        is_map_value = (
            key is not None and key.kind in (Kind.IDENT, Kind.QIDENT, Kind.STRING) and _is_sym(before_key, "{", ",")
        )
        return is_map_value
    return not _is_sym(prev, "|") or not _is_sym(_next(tokens, i), ")", "]", "-")


def screen(query: str) -> Screened:
    try:
        tokens = tokenize(query)
    except LexError as exc:
        raise QueryRejected(f"the query could not be read: {exc}") from None
    if not tokens:
        raise QueryRejected("'query' is empty; send an openCypher statement")
    query, tokens = _engine_text(query, tokens)
    if parse_cost(tokens) > MAX_PARSE_COST:
        raise QueryRejected(
            "the query nests too deeply (brackets, CASE blocks or runs of NOT / signs about 20 levels deep); "
            "the engine's parser slows down exponentially with nesting. Pass nested data in 'params' "
            "or flatten the expression"
        )

    is_write = _walk(tokens)

    params_used = {t.text for t in tokens if t.kind is Kind.PARAM}
    result = Screened(query=query, tokens=tokens, is_write=is_write, params_used=params_used)
    _plan_delete_check(query, tokens, result)
    return result


def _walk(tokens: list[Token]) -> bool:
    """Refuse what the engine does not support, tracking the clause each keyword sits in; True if it writes."""
    is_write = False
    clause_stack: list[str] = [""]  # current clause per nesting level
    depth_kinds: list[str] = []
    for i, t in enumerate(tokens):
        if t.kind is Kind.SYMBOL:
            if t.text in "([{":
                depth_kinds.append(t.text)
                clause_stack.append(clause_stack[-1] if t.text != "{" else "")
            elif t.text in ")]}" and depth_kinds:
                depth_kinds.pop()
                clause_stack.pop()
            continue
        if not _keyword_at(tokens, i):
            continue
        word = t.text.upper()
        nxt = _next(tokens, i)
        if word == "MATCH" or (word in CLAUSE_KEYWORDS and not _is_sym(nxt, "(")):
            clause_stack[-1] = word
        is_write = is_write or word in WRITE_KEYWORDS
        _refuse_call(tokens, i, word, nxt)
        _refuse_load_and_exists(word, nxt)
        _refuse_shortest_path(tokens, i, t, nxt, clause_stack[-1])
    return is_write


def _refuse_call(tokens: list[Token], i: int, word: str, nxt: Token | None) -> None:
    if word != "CALL":
        return
    if not _is_sym(nxt, "{", "("):
        name = _dotted_name(tokens, i + 1)
        raise QueryRejected(
            f"procedure calls are not supported (found 'CALL {name}'); procedures such as db.* and apoc.* "
            "are not available. Express it in openCypher instead: e.g. MATCH (n) RETURN DISTINCT labels(n) "
            "for labels, or use a CALL { ... } subquery"
        )
    if _is_sym(nxt, "(") and not _scoped_subquery(tokens, i + 1):
        raise QueryRejected(
            "procedure calls are not supported; use a CALL { ... } subquery or plain openCypher instead"
        )


def _refuse_load_and_exists(word: str, nxt: Token | None) -> None:
    if word == "LOAD" and nxt is not None and nxt.is_kw("CSV"):
        raise QueryRejected(
            "LOAD CSV is not supported; read the file in your application and pass its rows in 'params', "
            "e.g. UNWIND $rows AS row CREATE (:Item {name: row.name})"
        )
    if word == "EXISTS" and _is_sym(nxt, "{"):
        raise QueryRejected(
            "EXISTS { ... } blocks are not supported; use a bare pattern predicate instead, e.g. WHERE (n)-[:KNOWS]->()"
        )
    if word == "EXISTS" and _is_sym(nxt, "("):
        raise QueryRejected(
            "the exists() function is not supported; test a property with 'n.prop IS NOT NULL' "
            "and a pattern with a bare pattern predicate, e.g. WHERE (n)-[:KNOWS]->()"
        )


def _refuse_shortest_path(tokens: list[Token], i: int, t: Token, nxt: Token | None, clause: str) -> None:
    if t.text.upper() not in ("SHORTESTPATH", "ALLSHORTESTPATHS") or not _is_sym(nxt, "("):
        return
    if clause in ("MATCH", "OPTIONAL", "MERGE", "CREATE"):
        raise QueryRejected(
            f"{t.text} is not supported inside MATCH p = ...; call it in RETURN or WITH instead, "
            f"e.g. MATCH (a {{id: 1}}), (b {{id: 2}}) RETURN {t.text}((a)-[*]->(b)) AS p"
        )
    if not _directed(tokens, i + 1):
        raise QueryRejected(
            f"{t.text} needs a directed traversal; write the pattern with an arrow, e.g. {t.text}((a)-[*]->(b))"
        )


def _engine_text(query: str, tokens: list[Token]) -> tuple[str, list[Token]]:
    """Spell what the engine's parser lacks in forms it knows, on tokens (strings and comments untouched):
    `$1` parameters as `` $`1` ``, `0o17` octal integers in decimal, no final `;`, and `sum()` typed as openCypher
    types it (`cypher_sum`); all mean what the caller wrote."""
    query, tokens = _spelled(query, tokens)
    typed = typed_sums(query, tokens)
    return (query, tokens) if typed is None else (typed, tokenize(typed))


def _spelled(query: str, tokens: list[Token]) -> tuple[str, list[Token]]:
    edits: list[tuple[Token, str]] = []
    for k, t in enumerate(tokens):
        if _is_sym(t, ";"):
            if k != len(tokens) - 1:
                raise QueryRejected("send one statement per query; ';' may only end it")
            edits.append((t, ""))  # a final ';' ends the statement; the engine takes it for a second one
        elif t.kind is Kind.PARAM and query[t.start + 1 : t.start + 2].isdigit():
            edits.append((t, f"$`{t.text}`"))
        elif t.kind is Kind.NUMBER and t.text[:2] in ("0o", "0O"):
            if len(t.text) == 2:
                raise QueryRejected(f"the octal number at offset {t.start} has no digits")
            edits.append((t, str(int(t.text[2:], 8))))
    if not edits:
        return query, tokens
    out: list[str] = []
    pos = 0
    for t, text in edits:
        out.append(query[pos : t.start])
        out.append(text)
        pos = t.end
    out.append(query[pos:])
    rewritten = "".join(out)
    return rewritten, tokenize(rewritten)


def _dotted_name(tokens: list[Token], i: int) -> str:
    parts: list[str] = []
    while i < len(tokens) and (tokens[i].kind in (Kind.IDENT, Kind.QIDENT) or _is_sym(tokens[i], ".")):
        parts.append(tokens[i].text)
        i += 1
    return "".join(parts) or "?"


def _scoped_subquery(tokens: list[Token], i: int) -> bool:
    """`CALL (a, b) { ... }`: a variable-scoped subquery, not a procedure."""
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j]
        if _is_sym(t, "("):
            depth += 1
        elif _is_sym(t, ")"):
            depth -= 1
            if depth == 0:
                return _is_sym(_next(tokens, j), "{")
    return False


def _directed(tokens: list[Token], i: int) -> bool:
    """Inside `shortestPath( ... )` starting at the '(' token i: does every relationship have one arrow?"""
    depth = 0
    inner: list[Token] = []
    for j in range(i, len(tokens)):
        t = tokens[j]
        if _is_sym(t, "(", "[", "{"):
            depth += 1
        elif _is_sym(t, ")", "]", "}"):
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and t.kind is Kind.SYMBOL:
            inner.append(t)
    # relationship segments at depth 1 are runs of '-' '<' '>' (and brackets removed); each needs one arrow
    segments: list[str] = []
    cur = ""
    for t in inner:
        if t.text in ("-", "<", ">", "<>", "<=", ">="):
            cur += t.text
        elif t.text in ("(", ")"):
            if cur:
                segments.append(cur)
            cur = ""
    if cur:
        segments.append(cur)
    segments = [s for s in segments if "-" in s]
    if not segments:
        return False
    return all(s.startswith("<") != s.endswith(">") for s in segments)


def _plan_delete_check(query: str, tokens: list[Token], result: Screened) -> None:
    """Find the first plain DELETE (no DETACH) at top level and what can be checked before it runs."""
    depth = 0
    for i, t in enumerate(tokens):
        if _is_sym(t, "(", "[", "{"):
            depth += 1
            continue
        if _is_sym(t, ")", "]", "}"):
            depth -= 1
            continue
        if not t.is_kw("DELETE") or not _keyword_at(tokens, i):
            continue
        prev = _prev(tokens, i)
        if prev is not None and prev.is_kw("DETACH"):
            continue
        if depth != 0:
            result.unchecked_delete = True  # inside FOREACH or a subquery
            return
        prefix_tokens = tokens[:i]
        if any(
            _keyword_at(tokens, k) and tokens[k].text.upper() in (*WRITE_KEYWORDS, "UNION", "CALL")
            for k in range(len(prefix_tokens))
        ):
            result.unchecked_delete = True
            return
        items: list[str] = []
        item_start = i + 1
        d = 0
        j = i + 1
        while j < len(tokens):
            tj = tokens[j]
            if _is_sym(tj, "(", "[", "{"):
                d += 1
            elif _is_sym(tj, ")", "]", "}"):
                d -= 1
            elif d == 0 and _is_sym(tj, ","):
                items.append(query[tokens[item_start].start : tokens[j - 1].end])
                item_start = j + 1
            elif d == 0 and ((_keyword_at(tokens, j) and tj.text.upper() in CLAUSE_KEYWORDS) or _is_sym(tj, ";")):
                break
            j += 1
        if item_start < j:
            items.append(query[tokens[item_start].start : tokens[j - 1].end])
        if not items:
            return
        result.delete_check = DeleteCheck(prefix=query[: t.start], items=items)
        # later plain DELETEs after this one are not pre-checked
        return


def delete_probe(check: DeleteCheck) -> str:
    """A read-only query: how many relationships would a plain DELETE leave dangling (openCypher forbids it)."""
    items = ", ".join(check.items)
    return (
        f"{check.prefix}\n"
        f"WITH [{items}] AS __cs_del\n"
        "UNWIND __cs_del AS __cs_x\n"
        "WITH [__cs_q IN [__cs_x] WHERE typeOf(__cs_q) = 'Node' | id(__cs_q)] + "
        "reduce(__cs_a = [], __cs_p IN [__cs_q IN [__cs_x] WHERE typeOf(__cs_q) = 'Path'] | "
        "__cs_a + [__cs_m IN nodes(__cs_p) | id(__cs_m)]) AS __cs_ns, "
        "[__cs_q IN [__cs_x] WHERE typeOf(__cs_q) = 'Edge' | id(__cs_q)] + "
        "reduce(__cs_a = [], __cs_p IN [__cs_q IN [__cs_x] WHERE typeOf(__cs_q) = 'Path'] | "
        "__cs_a + [__cs_e IN relationships(__cs_p) | id(__cs_e)]) AS __cs_rs\n"
        "WITH collect(__cs_ns) AS __cs_nss, collect(__cs_rs) AS __cs_rss\n"
        "WITH reduce(__cs_a = [], __cs_l IN __cs_nss | __cs_a + __cs_l) AS __cs_nids, "
        "reduce(__cs_a = [], __cs_l IN __cs_rss | __cs_a + __cs_l) AS __cs_rids\n"
        "UNWIND __cs_nids AS __cs_nid\n"
        "MATCH (__cs_n)-[__cs_r]-() WHERE id(__cs_n) = __cs_nid AND NOT id(__cs_r) IN __cs_rids\n"
        "RETURN id(__cs_n) AS node LIMIT 1"
    )
