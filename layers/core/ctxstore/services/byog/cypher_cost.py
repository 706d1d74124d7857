"""How hard a query is for the engine's parser, estimated on tokens before it is sent.

The engine's openCypher parser backtracks: every level of nesting doubles the work
spent on what is inside it. Measured on the embedded engine (2 cores): a list nested
16 deep parses in 0.25 s, 20 deep in 4.8 s, 21 deep in 11 s, 40 deep never finishes.
Brackets, `CASE ... END` and chains of prefix operators (`NOT NOT x`, `- -1`) all
nest. Parsing happens before the engine's query timer starts, so a deep query holds
one of the engine's few worker threads past any timeout; enough of them wedge the
engine for every tenant. The estimate is the sum over tokens of 2^depth, which
over-counts (the safe direction) and stays tiny for ordinary queries.
"""

from __future__ import annotations

from ctxstore.services.byog.cypher_lexer import Kind, Token

# A 20-deep nested list or map (the deepest the openCypher TCK asks an answer for) scores 3.1-4.2M
# and parses in ~2-5 s, inside the 8 s read budget; 21 deep scores 6.3M (11 s).
MAX_PARSE_COST = 4_500_000

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = set(_OPEN.values())
# Tokens that end the operand of a prefix operator at the same nesting level.
_BINARY_SYMBOLS = {",", "=", "<>", "<", ">", "<=", ">=", "=~", "*", "/", "%", "^", "..", "|", "+=", ";"}
_OPERAND_ENDERS = {
    "AND", "OR", "XOR", "IN", "IS", "STARTS", "ENDS", "CONTAINS", "AS", "WHEN", "THEN", "ELSE",
    "MATCH", "OPTIONAL", "WHERE", "WITH", "RETURN", "UNWIND", "CREATE", "MERGE", "SET", "DELETE",
    "DETACH", "REMOVE", "FOREACH", "CALL", "UNION", "ORDER", "BY", "SKIP", "LIMIT", "ON", "ASC",
    "ASCENDING", "DESC", "DESCENDING", "DISTINCT", "YIELD",
}  # fmt: skip
# After these a '-' or '+' is a sign, not subtraction.
_SIGN_AFTER_KEYWORDS = _OPERAND_ENDERS | {"NOT", "CASE"}


def _is_sign(prev: Token | None) -> bool:
    if prev is None:
        return True
    if prev.kind is Kind.SYMBOL:
        return prev.text not in _CLOSE
    return prev.kind is Kind.IDENT and prev.text.upper() in _SIGN_AFTER_KEYWORDS


def parse_cost(tokens: list[Token]) -> int:
    """Sum of 2^depth over the tokens, depth counting brackets, CASE blocks and prefix-operator runs."""
    # one entry per open bracket or CASE: [depth of its contents, extra depth from prefix operators, closer]
    levels: list[list[int | str]] = [[0, 0, ""]]
    cost = 0
    prev: Token | None = None
    for i, t in enumerate(tokens):
        top = levels[-1]
        depth = int(top[0]) + int(top[1])
        # map keys and their colons cost the parser next to nothing (a 20-deep map parses as fast as a list)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        is_key = top[2] == "}" and nxt is not None and nxt.kind is Kind.SYMBOL and nxt.text == ":"
        if not (is_key or (top[2] == "}" and t.kind is Kind.SYMBOL and t.text == ":")):
            cost += 1 << min(depth, 62)
        word = t.text.upper() if t.kind is Kind.IDENT else ""
        if t.kind is Kind.SYMBOL and t.text in _OPEN:
            levels.append([depth + 1, 0, _OPEN[t.text]])
        elif word == "CASE":
            levels.append([depth + 1, 0, "END"])
        elif len(levels) > 1 and ((t.kind is Kind.SYMBOL and t.text == top[2]) or (word == "END" == top[2])):
            levels.pop()
        elif word == "NOT" or (t.kind is Kind.SYMBOL and t.text in ("-", "+") and _is_sign(prev)):
            top[1] = int(top[1]) + 1
        elif (t.kind is Kind.SYMBOL and t.text in _BINARY_SYMBOLS | {"-", "+"}) or word in _OPERAND_ENDERS:
            top[1] = 0
        prev = t
    return cost
