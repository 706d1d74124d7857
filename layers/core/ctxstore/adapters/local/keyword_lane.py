"""The keyword lane of the local index: a query's stems, and bm25 from the queried collections' statistics.

Each chunk's title and text are indexed as Porter stems prefixed with the code of the chunk's collection
(keyword_terms.py) in an external-content FTS5 table, so a term's postings are one collection's. bm25 is
computed here, per query, from the queried collections only: document count and total length per
collection (`kw_scopes`), document frequencies (`kw_df`), term frequencies and lengths per row
(keyword_postings.py). FTS5's own bm25() uses table-wide statistics, so another organisation's or
collection's data changed a score (and leaked its size); here it cannot (tests/unit/test_keyword_scope_stats.py).
Same formula and constants as FTS5 (k1 1.2, b 0.75, title weight 2, idf floor 1e-6), except that scopes of
short texts (under 64 words on average) do not normalise length (b 0). User text never reaches the MATCH
grammar. SqliteSearchIndex (sqlite_search_index.py) owns the tables and the snapshot; this module reads them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from sqlite3 import Connection

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local import keyword_df_copy as df_copy
from ctxstore.adapters.local import keyword_postings as kp
from ctxstore.adapters.local import keyword_terms as kt
from ctxstore.domain.stopwords import ENGLISH_STOPWORDS
from ctxstore.ports.search_index import SearchFilter

TITLE_WEIGHT = 2.0
TEXT_WEIGHT = 1.0
BM25_K1 = 1.2
BM25_B = 0.75
# Scopes of short texts (chat turns, one-line memories: on average under SHORT_TEXT_TOKENS words) do not
# normalise length: a turn's length says how chatty it is, not how diluted its topic. LoCoMo, one memory
# per turn, R@10 in fast, conversations 0-4 (where b was chosen) / held-out 5-9: b 0.75 0.6395 / 0.575,
# 0.5 0.6554 / 0.5908, 0.3 0.6657 / 0.6015, 0.15 0.6701 / 0.6047, 0 0.6731 / 0.6107 (docs/benchmarks.md).
# SciFact (~250 words per abstract) keeps 0.75.
SHORT_TEXT_TOKENS = 64
BM25_B_SHORT = 0.0
MAX_QUERY_TERMS = 64
# An OR query whose terms' postings add up past this drops its most common terms (keeping at least
# two): bm25 scores every matching row, so three very common words over 100k chunks cost ~120 ms,
# while the words they drop carry the lowest idf and move the ranking least.
MAX_OR_POSTINGS = 5_000

# Lucene's English stop set. Dropped from "or" queries only (unless nothing else is left): under bm25 they
# add almost nothing to the ranking but make every row of a collection a match.
STOPWORDS = ENGLISH_STOPWORDS


@dataclass(frozen=True)
class KeywordQuery:
    """The stems a query scores with, and (for and/phrase) the words that must match."""

    terms: list[str]  # distinct stems, in query order
    required: list[str]  # stems every match must hold, in order (and: all, phrase: the sequence)
    phrase: bool


def keyword_query(query: str, operator: str) -> KeywordQuery | None:
    """None when the query has no words."""
    if operator not in ("or", "and", "phrase"):
        raise ValueError(f"unknown keyword operator {operator!r}; use 'or', 'and' or 'phrase'")
    words = kt.words(query)
    if not words:
        return None
    distinct = list(dict.fromkeys(words))[:MAX_QUERY_TERMS]
    if operator == "or":
        distinct = [w for w in distinct if w not in STOPWORDS] or distinct
        return KeywordQuery(list(dict.fromkeys(kt.stem(w) for w in distinct)), [], False)
    stems = list(dict.fromkeys(kt.stem(w) for w in distinct))
    if operator == "and":
        return KeywordQuery(stems, stems, False)
    return KeywordQuery(stems, [kt.stem(w) for w in words[:MAX_QUERY_TERMS]], True)


def match_expression(codes: Sequence[str], q: KeywordQuery) -> str:
    """and/phrase: rows of any of the scopes holding the required stems (tokens are [0-9a-z...] only)."""
    if q.phrase:
        per_scope = ['"' + " ".join(code + t for t in q.required) + '"' for code in codes]
    else:
        per_scope = ["(" + " AND ".join(f'"{code}{t}"' for t in q.required) + ")" for code in codes]
    return " OR ".join(per_scope)


class KeywordLane:
    """bm25 scoring over the index's keyword tables; holds the in-memory chunk lengths it reads."""

    def __init__(self) -> None:
        self.lengths = kp.ChunkLengths()

    def scopes(self, conn: Connection, org: str, flt: SearchFilter) -> list[tuple[int, int, int]]:
        """(id, documents, tokens) of the collections a search covers."""
        if flt.collections:
            return [
                (int(r[0]), int(r[1]), int(r[2]))
                for r in conn.execute(
                    "SELECT id, docs, tokens FROM kw_scopes WHERE org=? AND database=? AND store=?"
                    " AND collection IN (SELECT value FROM json_each(?)) AND docs > 0",
                    (org, flt.database, flt.store, json.dumps(list(dict.fromkeys(flt.collections)))),
                )
            ]
        return [
            (int(r[0]), int(r[1]), int(r[2]))
            for r in conn.execute(
                "SELECT id, docs, tokens FROM kw_scopes WHERE org=? AND database=? AND store=? AND docs > 0",
                (org, flt.database, flt.store),
            )
        ]

    @staticmethod
    def prune(terms: list[str], df: dict[str, int]) -> list[str]:
        """OR queries whose postings add up past MAX_OR_POSTINGS drop their most common terms (keeping two)."""
        if len(terms) <= 2 or sum(df.values()) <= MAX_OR_POSTINGS:
            return terms
        kept: list[str] = []
        total = 0
        for term in sorted(terms, key=lambda t: (df[t], terms.index(t))):
            if len(kept) >= 2 and total + df[term] > MAX_OR_POSTINGS:
                break
            kept.append(term)
            total += df[term]
        return [t for t in terms if t in kept]

    def bm25(
        self, conn: Connection, org: str, flt: SearchFilter, q: KeywordQuery
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        """Every matching row of the scope and its bm25, from the scope's statistics only.

        The formula is FTS5's (idf = ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6, times
        tf(k1 + 1) / (tf + k1(1 - b + b dl/avgdl)), tf weighted by column), with N, n and avgdl of the
        queried collections: document counts and lengths from `kw_scopes`, document frequencies from
        `kw_df`, term frequencies and lengths per row (keyword_postings.py), all in the caller's snapshot.
        """
        scopes = self.scopes(conn, org, flt)
        if not scopes:
            return None
        docs = sum(n for _, n, _ in scopes)
        avgdl = max(1.0, sum(t for _, _, t in scopes) / docs)
        codes = [kt.scope_code(sid) for sid, _, _ in scopes]
        if len(scopes) >= df_copy.MANY_SCOPES:  # one row per term from the term-first copy (keyword_df_copy.py)
            ids = [sid for sid, _, _ in scopes]
            df_scoped = df_copy.doc_freqs(conn, org, flt.database, flt.store, ids, q.terms)
        else:
            df_scoped = kp.doc_freqs(conn, [c + t for c in codes for t in q.terms])
        # Summed from the tokens that occur (a few hundred of the ~900 asked for 100 collections), not every pair.
        df = dict.fromkeys(q.terms, 0)
        for token, n in df_scoped.items():
            df[token[kt.CODE_LEN :]] += n
        if q.required and any(df.get(t, 0) == 0 for t in q.required):
            return None  # and/phrase: a required word occurs nowhere in scope
        terms = [t for t in q.terms if df[t] > 0]
        if not q.required:
            terms = self.prune(terms, df)
        if not terms:
            return None
        must: set[int] | None = None
        if q.required:
            match = match_expression(codes, q)
            must = {int(r[0]) for r in conn.execute("SELECT rowid FROM kw_fts WHERE kw_fts MATCH ?", (match,))}
        # Every (term, collection) token's postings in one read; a row is in one collection, so a term's
        # tokens never share a row and summing per (row, term) gives each term's frequency in the row.
        term_index = {term: i for i, term in enumerate(terms)}
        wanted = [
            (term_index[t[kt.CODE_LEN :]], t) for t, n in df_scoped.items() if n and t[kt.CODE_LEN :] in term_index
        ]
        token_at, docs_at, weights = kp.postings_of(conn, [token for _, token in wanted], TITLE_WEIGHT, TEXT_WEIGHT)
        if docs_at.size == 0:
            return None
        term_at = np.array([i for i, _ in wanted], dtype=np.int64)[token_at]
        rowids, inverse = np.unique(docs_at, return_inverse=True)
        cells = np.bincount(inverse * len(terms) + term_at, weights=weights, minlength=rowids.size * len(terms))
        tf = cells.reshape(rowids.size, len(terms))
        if must is not None:
            keep = np.isin(rowids, np.fromiter(must, dtype=np.int64, count=len(must)))
            rowids, tf = rowids[keep], tf[keep]
            if rowids.size == 0:
                return None
        dl = self.lengths.lengths(conn, rowids)
        n_t = np.array([df[t] for t in terms], dtype=np.float64)
        idf = np.maximum(np.log((docs - n_t + 0.5) / (n_t + 0.5)), 1e-6)
        b = BM25_B_SHORT if avgdl < SHORT_TEXT_TOKENS else BM25_B
        norm = BM25_K1 * (1.0 - b + b * dl / avgdl)
        scores = (idf * tf * (BM25_K1 + 1.0) / (tf + norm[:, None])).sum(axis=1)
        return rowids, scores
