"""Words of the keyword lane: folded, without diacritics, Porter-stemmed; and their per-collection tokens.

The SQLite index stores, per chunk, the stems of its title and text each prefixed with the code of the
chunk's collection (`scope_code`), and lets FTS5 keep the postings. So a term's postings, its document
frequency and the document count used for its weight all belong to one collection, never to another
collection or organisation: bm25 is computed per scope (sqlite_search_index.py), not table-wide.

Folding matches FTS5's `unicode61 remove_diacritics 2`: lower case, combining marks removed after NFKD;
words are runs of letters and digits (an underscore splits, as it did in FTS5).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata

import Stemmer  # type: ignore[import-not-found]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CODE_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
CODE_LEN = 6  # 36^6 = 2.2 billion collections per data dir
_MAX_CACHE = 200_000

_local = threading.local()
_cache: dict[str, str] = {}


def _stemmer() -> Stemmer.Stemmer:
    st = getattr(_local, "stemmer", None)
    if st is None:  # a Stemmer object is not safe to share between threads
        st = _local.stemmer = Stemmer.Stemmer("porter")
    return st


def fold(text: str) -> str:
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    # Combining marks are looked up once per distinct character, not per character (an abstract with one
    # Greek letter or "±" made this a Python loop over all of its ~1,500 characters).
    marks = {ord(ch): None for ch in set(decomposed) if unicodedata.combining(ch)}
    return decomposed.translate(marks) if marks else decomposed


def words(text: str) -> list[str]:
    """The folded words of a text, in order, duplicates kept (before stemming)."""
    return _WORD.findall(fold(text))


def stem(word: str) -> str:
    out = _cache.get(word)
    if out is None:
        out = _stemmer().stemWord(word) or word
        if len(_cache) > _MAX_CACHE:
            _cache.clear()
        _cache[word] = out
    return out


def stems(text: str) -> list[str]:
    return [stem(w) for w in words(text)]


@functools.lru_cache(maxsize=65_536)
def scope_code(scope_id: int) -> str:
    """A fixed-width code for a collection's id: prefix + stem is one token with no separator needed (kept: a query
    into 100 collections asks for 100)."""
    if scope_id < 0 or scope_id >= 36**CODE_LEN:
        raise ValueError(f"scope id {scope_id} out of range")
    out = []
    for _ in range(CODE_LEN):
        scope_id, r = divmod(scope_id, 36)
        out.append(_CODE_DIGITS[r])
    return "".join(reversed(out))


def scoped(code: str, terms: list[str]) -> str:
    """The token stream FTS5 indexes (tokenizer `ascii`: splits on spaces, never inside a token)."""
    return " ".join(code + t for t in terms)
