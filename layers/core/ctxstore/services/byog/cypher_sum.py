"""Typed `sum()`: the engine adds in doubles, so `sum` of integers answers a float (`15.0`, not `15`).

openCypher types the sum: integers only give an integer, any float gives a float. Each aggregate call
`sum(x)` / `sum(DISTINCT x)` is spelled, on tokens, as

    CASE min(typeOf(x)) WHEN 'Float' THEN sum(x) ELSE toInteger(sum(x)) END

`min` of the type names is 'Float' exactly when a float is among the values ('Float' < 'Integer' < 'Null';
any other type makes `sum` itself fail, as before); no rows gives null, so the ELSE branch answers 0.
The engine rejects the obvious `reduce(.. IN collect(x) ..)` ("Invalid use of aggregating function"), while
aggregates inside CASE and function calls group exactly like the bare aggregate. The integer is what the engine's
double sum holds, so it is exact while the running sum stays within +-2^53.

An unaliased RETURN item that holds a sum gets its original text as alias, so the column keeps its name.
"""

from __future__ import annotations

from ctxstore.services.byog.cypher_lexer import Kind, Token

_ITEM_END = ("ORDER", "SKIP", "LIMIT", "UNION", "WITH", "RETURN", "MATCH", "OPTIONAL", "UNWIND", "CALL")


def _sym(t: Token | None, *syms: str) -> bool:
    return t is not None and t.kind is Kind.SYMBOL and t.text in syms


def _sum_call(tokens: list[Token], i: int) -> int | None:
    """The index of the ')' closing the aggregate call `sum(` at token i, or None if it is not one."""
    t = tokens[i]
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if t.kind is not Kind.IDENT or t.text.lower() != "sum" or not _sym(nxt, "("):
        return None
    if i > 0 and _sym(tokens[i - 1], "."):  # `ns.sum(...)`: another namespace's function
        return None
    depth = 0
    for j in range(i + 1, len(tokens)):
        if _sym(tokens[j], "(", "[", "{"):
            depth += 1
        elif _sym(tokens[j], ")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j if tokens[j].text == ")" else None
    return None


def _typed(query: str, tokens: list[Token], i: int, close: int) -> str:
    first = i + 2
    distinct = first < close and tokens[first].is_kw("DISTINCT")
    arg_start = first + 1 if distinct else first
    if arg_start >= close:  # `sum()`: leave the engine's own error
        return query[tokens[i].start : tokens[close].end]
    arg = query[tokens[arg_start].start : tokens[close - 1].end]
    name = tokens[i].text
    inner = f"{name}({'DISTINCT ' if distinct else ''}{arg})"
    return f"CASE min(typeOf({arg})) WHEN 'Float' THEN {inner} ELSE toInteger({inner}) END"


def _return_aliases(query: str, tokens: list[Token], calls: dict[int, int]) -> dict[int, str]:
    """For each unaliased RETURN item holding a sum call: the token index the item ends at -> its alias."""
    out: dict[int, str] = {}
    for r, t in enumerate(tokens):
        if not t.is_kw("RETURN") or (r > 0 and _sym(tokens[r - 1], ".", ":", "{", ",")):
            continue
        k = r + 1
        if k < len(tokens) and tokens[k].is_kw("DISTINCT"):
            k += 1
        depth = 0
        start = k
        aliased = has_sum = False
        while k <= len(tokens):
            tk = tokens[k] if k < len(tokens) else None
            at_end = tk is None or (depth == 0 and (_sym(tk, ",", ")", "]", "}") or tk.is_kw(*_ITEM_END)))
            if at_end:
                if has_sum and not aliased and k > start:
                    text = query[tokens[start].start : tokens[k - 1].end]
                    out[k - 1] = " AS `" + text.replace("`", "``") + "`"
                if tk is None or not _sym(tk, ","):
                    break
                start, aliased, has_sum = k + 1, False, False
            elif _sym(tk, "(", "[", "{"):
                depth += 1
            elif _sym(tk, ")", "]", "}"):
                depth -= 1
            elif depth == 0 and tk is not None and tk.is_kw("AS"):
                aliased = True
            if k in calls:
                has_sum = True
            k += 1
    return out


def typed_sums(query: str, tokens: list[Token]) -> str | None:
    """The query with every aggregate `sum` typed as openCypher types it, or None when it has none."""
    calls: dict[int, int] = {}
    i = 0
    while i < len(tokens):
        close = _sum_call(tokens, i)
        if close is None:
            i += 1
            continue
        calls[i] = close
        i = close + 1  # a sum nested in a sum is an error the engine reports
    if not calls:
        return None
    aliases = _return_aliases(query, tokens, calls)
    out: list[str] = []
    pos = 0
    for k, tok in enumerate(tokens):
        if k in calls:
            out.append(query[pos : tok.start])
            out.append(_typed(query, tokens, k, calls[k]))
            pos = tokens[calls[k]].end
        if k in aliases and tok.end >= pos:
            out.append(query[pos : tok.end])
            out.append(aliases[k])
            pos = tok.end
    out.append(query[pos:])
    return "".join(out)
