"""A small openCypher lexer, enough to screen queries on tokens rather than on raw text.

It understands string literals (single and double quotes, backslash escapes),
backtick-quoted identifiers (a doubled backtick escapes one), line (`//`) and block
(`/* */`) comments, parameters (`$name`, `$0`, `` $`odd name` ``), numbers (decimal, `0x` hex, `0o` octal), and the
multi-character operators. Text inside strings and comments never becomes a keyword.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    IDENT = "ident"  # bare identifier or keyword
    QIDENT = "qident"  # `backtick identifier`: never a keyword
    STRING = "string"
    NUMBER = "number"
    PARAM = "param"
    SYMBOL = "symbol"


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str  # for STRING/QIDENT/PARAM the decoded value, else the source text
    start: int  # offsets into the query text
    end: int

    def is_kw(self, *words: str) -> bool:
        return self.kind is Kind.IDENT and self.text.upper() in words


class LexError(ValueError):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} at offset {pos}")
        self.pos = pos


_MULTI = ("<>", "<=", ">=", "=~", "+=", "..", "::")
_SYMBOLS = set("()[]{},.:;|=<>+-*/%^!&?")
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _ident_start(c: str) -> bool:
    return c.isalpha() or c == "_"


def _ident_part(c: str) -> bool:
    return c.isalnum() or c == "_"


def tokenize(src: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(src)
    while i < n:
        skipped = _skip(src, i)
        if skipped > i:
            i = skipped
            continue
        token = _token(src, i)
        out.append(token)
        i = token.end
    return out


def _skip(src: str, i: int) -> int:
    """Past the whitespace or comment at i (i itself when there is none)."""
    if src[i].isspace():
        return i + 1
    if src.startswith("//", i):
        j = src.find("\n", i)
        return len(src) if j < 0 else j + 1
    if src.startswith("/*", i):
        j = src.find("*/", i + 2)
        if j < 0:
            raise LexError("unterminated block comment", i)
        return j + 2
    return i


def _token(src: str, i: int) -> Token:
    """The token that starts at i."""
    c = src[i]
    if c in "'\"":
        text, j = _string(src, i)
        return Token(Kind.STRING, text, i, j)
    if c == "`":
        text, j = _backtick(src, i)
        return Token(Kind.QIDENT, text, i, j)
    if c == "$":
        return _param(src, i)
    if c.isdigit():
        j = _number(src, i)
        return Token(Kind.NUMBER, src[i:j], i, j)
    if _ident_start(c):
        j = _ident_end(src, i + 1)
        return Token(Kind.IDENT, src[i:j], i, j)
    two = src[i : i + 2]
    if two in _MULTI:
        return Token(Kind.SYMBOL, two, i, i + 2)
    if c in _SYMBOLS:
        return Token(Kind.SYMBOL, c, i, i + 1)
    raise LexError(f"unexpected character {c!r}", i)


def _ident_end(src: str, j: int) -> int:
    while j < len(src) and _ident_part(src[j]):
        j += 1
    return j


def _param(src: str, i: int) -> Token:
    j = i + 1
    if j < len(src) and src[j] == "`":
        name, j = _backtick(src, j)
    else:
        j = _ident_end(src, j)
        name = src[i + 1 : j]
        if not name:
            raise LexError("'$' must be followed by a parameter name", i)
    return Token(Kind.PARAM, name, i, j)


def _string(src: str, i: int) -> tuple[str, int]:
    quote = src[i]
    j = i + 1
    buf: list[str] = []
    while j < len(src):
        c = src[j]
        if c == "\\":
            if j + 1 >= len(src):
                break
            e = src[j + 1]
            if e in _ESCAPES:
                buf.append(_ESCAPES[e])
                j += 2
            elif e in "uU":
                width = 4 if e == "u" else 8
                digits = src[j + 2 : j + 2 + width]
                try:
                    buf.append(chr(int(digits, 16)))
                except ValueError:
                    raise LexError("invalid unicode escape", j) from None
                j += 2 + width
            else:  # unknown escape: keep it verbatim, the engine decides
                buf.append(e)
                j += 2
            continue
        if c == quote:
            return "".join(buf), j + 1
        buf.append(c)
        j += 1
    raise LexError("unterminated string literal", i)


def _backtick(src: str, i: int) -> tuple[str, int]:
    j = i + 1
    buf: list[str] = []
    while j < len(src):
        if src[j] == "`":
            if src.startswith("``", j):
                buf.append("`")
                j += 2
                continue
            return "".join(buf), j + 1
        buf.append(src[j])
        j += 1
    raise LexError("unterminated backtick identifier", i)


def _number(src: str, i: int) -> int:
    n = len(src)
    j = i
    if src.startswith(("0x", "0X"), i):
        j = i + 2
        while j < n and src[j] in "0123456789abcdefABCDEF":
            j += 1
        return j
    if src.startswith(("0o", "0O"), i):
        j = i + 2
        while j < n and src[j] in "01234567":
            j += 1
        return j
    while j < n and src[j].isdigit():
        j += 1
    # a fraction, but not the range operator `1..2`
    if j + 1 < n and src[j] == "." and src[j + 1].isdigit():
        j += 1
        while j < n and src[j].isdigit():
            j += 1
    if j < n and src[j] in "eE":
        k = j + 1
        if k < n and src[k] in "+-":
            k += 1
        if k < n and src[k].isdigit():
            j = k
            while j < n and src[j].isdigit():
                j += 1
    return j
