"""bm25 computed from scratch over a set of chunks taken as one corpus: what the keyword lane must answer; and a
keyword search with the statements it ran."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.adapters.local import keyword_terms as kt
from ctxstore.adapters.local.keyword_lane import BM25_B, BM25_K1, TEXT_WEIGHT, TITLE_WEIGHT
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

if TYPE_CHECKING:
    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex


def reference_bm25(docs: Sequence[ChunkDoc], query: Sequence[str]) -> dict[str, float]:
    """Scores by chunk id of the chunks that hold a query word (title and text weighted as the lane does)."""
    stems = [(kt.stems(d.title), kt.stems(d.text)) for d in docs]
    avgdl = sum(len(t) + len(x) for t, x in stems) / len(docs)
    out: dict[str, float] = {}
    for d, (title, text) in zip(docs, stems, strict=True):
        score = 0.0
        for term in (kt.stem(w) for w in query):
            n = sum(term in t or term in x for t, x in stems)
            tf = TITLE_WEIGHT * title.count(term) + TEXT_WEIGHT * text.count(term)
            if tf:
                idf = max(math.log((len(docs) - n + 0.5) / (n + 0.5)), 1e-6)
                norm = BM25_K1 * (1 - BM25_B + BM25_B * (len(title) + len(text)) / avgdl)
                score += idf * tf * (BM25_K1 + 1) / (tf + norm)
        if score:
            out[d.chunk_id] = score
    return out


def traced_keyword_search(
    idx: SqliteSearchIndex, org: str, flt: SearchFilter, text: str
) -> tuple[dict[str, float], list[str]]:
    """A keyword search's scores by chunk id, and the SQL statements it ran on its thread's connection."""
    statements: list[str] = []
    conn = idx._query_conn()  # this thread's connection: the one the search reads on
    conn.set_trace_callback(statements.append)
    try:
        got = {h.chunk_id: h.score for h in idx.keyword_search(org, flt, text, limit=10_000)}
    finally:
        conn.set_trace_callback(None)
    return got, statements
