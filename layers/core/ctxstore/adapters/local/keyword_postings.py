"""What the keyword lane reads besides FTS5's doclists: document frequencies, term frequencies, lengths.

Reading a term's postings through FTS5's bm25() costs two B-tree lookups per matching row (its column
sizes, and the row's length from `chunks`), and fts5vocab's 'row' table counts a term's documents by
walking its whole doclist. At 100k chunks that was 15 of the keyword lane's 20 ms (docs/benchmarks.md,
issue 15). Instead:

- `kw_term_df` holds each scoped token's document count, kept in the writes' own transactions, so a search
  reads its statistics in the same snapshot as the postings. It is keyed by (term, collection code), term
  first: a query's term has its counts for every collection side by side, so a query into 100 collections
  reads a few pages per term instead of one page per (collection, term) (the table has ~9 tokens per chunk:
  9.2M rows at 1M chunks). 100 collections: 2.6-7.7 -> 1.2-1.5 ms; one collection: the same (0.06-0.09 ms);
  (token-first `kw_df` before, migrated on open: sqlite_search_migration.py);
- a token's postings come from fts5vocab 'instance' (row, column per occurrence), concatenated by
  SQLite into one string per column and parsed by numpy, then summed into weighted term frequencies
  (the same integers FTS5's bm25() weighs: title occurrences count TITLE_WEIGHT, text ones TEXT_WEIGHT);
- chunk lengths come from `ChunkLengths`, an in-memory map from row id to length. A row's keyword
  length never changes (an upsert deletes and inserts a new row) and row ids are never reused
  (AUTOINCREMENT), so an entry can go stale only by its row being deleted, and then no posting names it.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from sqlite3 import Connection

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local import keyword_terms as kt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

DF_TABLE = (
    "CREATE TABLE IF NOT EXISTS kw_term_df (term TEXT NOT NULL, code TEXT NOT NULL, docs INTEGER NOT NULL,"
    " PRIMARY KEY (term, code)) WITHOUT ROWID"
)
_CODE = kt.CODE_LEN
# Per connection: fts5vocab tables over the keyword index (temp: they are views of main's kw_fts).
VOCAB_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kw_rows USING fts5vocab(main, kw_fts, 'row')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kw_postings USING fts5vocab(main, kw_fts, 'instance')",
)


def row_tokens(kw_title: str | None, kw_text: str | None) -> set[str]:
    """The distinct scoped tokens of one row (each counts once towards its document frequency)."""
    return set((kw_title or "").split()) | set((kw_text or "").split())


def change_doc_freqs(conn: Connection, change: Counter[str]) -> None:
    """Add the counts (negative for deleted rows) in the caller's transaction; drop tokens left at zero."""
    deltas = [(token[_CODE:], token[:_CODE], n) for token, n in change.items() if n]
    if not deltas:
        return
    conn.executemany(
        "INSERT INTO kw_term_df (term, code, docs) VALUES (?, ?, ?)"
        " ON CONFLICT (term, code) DO UPDATE SET docs = docs + excluded.docs",
        deltas,
    )
    gone = [(term, code) for term, code, n in deltas if n < 0]
    if gone:
        conn.executemany("DELETE FROM kw_term_df WHERE term = ? AND code = ? AND docs <= 0", gone)


def fill_doc_freqs(conn: Connection) -> None:
    """Derive `kw_term_df` from the index itself (files written before it existed), in the caller's transaction."""
    for statement in VOCAB_TABLES:
        conn.execute(statement)
    conn.execute("DELETE FROM kw_term_df")
    conn.execute(
        f"INSERT INTO kw_term_df (term, code, docs) SELECT substr(term, {_CODE + 1}), substr(term, 1, {_CODE}), doc"
        " FROM temp.kw_rows WHERE doc > 0 ORDER BY 1, 2"
    )


def rekey_doc_freqs(conn: Connection) -> None:
    """Move the token-keyed `kw_df` of earlier files into `kw_term_df` (replacing what it held: a release
    before this one may have written `kw_df` since), in the caller's transaction. ~40 s at 9M tokens."""
    conn.execute("DELETE FROM kw_term_df")
    conn.execute(
        f"INSERT INTO kw_term_df (term, code, docs) SELECT substr(token, {_CODE + 1}), substr(token, 1, {_CODE}), docs"
        " FROM kw_df ORDER BY 1, 2"
    )
    conn.execute("DROP TABLE kw_df")


def doc_freqs(conn: Connection, codes: Sequence[str], terms: Sequence[str]) -> dict[str, int]:
    """Document counts of every (collection code, term) token that occurs, by token (code + term)."""
    rows = conn.execute(
        "SELECT code, term, docs FROM kw_term_df WHERE term IN (SELECT value FROM json_each(?))"
        " AND code IN (SELECT value FROM json_each(?))",
        (json.dumps(list(terms)), json.dumps(list(codes))),
    ).fetchall()
    return {str(c) + str(t): int(d) for c, t, d in rows}


def _ints(joined: str | None) -> IntArray:
    if not joined:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(np.fromstring(joined, dtype=np.int64, sep=","), dtype=np.int64)


def postings_of(
    conn: Connection, tokens: Sequence[str], title_weight: float, text_weight: float
) -> tuple[IntArray, IntArray, FloatArray]:
    """Every occurrence of many scoped tokens in one statement: (index into `tokens`, row id, weight).

    A term in 100 collections is 100 tokens: a statement and a parse each cost ~0.3 ms, 130-170 ms for a
    query into 100 collections of a 1M-chunk index (bench/retrieval/small_scopes.py)."""
    keys, rows, in_title = conn.execute(
        "SELECT group_concat(t.key), group_concat(p.doc), group_concat(p.col = 'kw_title')"
        " FROM json_each(?) AS t CROSS JOIN temp.kw_postings AS p ON p.term = t.value",
        (json.dumps(list(tokens)),),
    ).fetchone()
    weights = np.where(_ints(in_title) == 1, title_weight, text_weight).astype(np.float64)
    return _ints(keys), _ints(rows), weights


class ChunkLengths:
    """Keyword length by row id, loaded once and extended with the rows a search meets first.

    A dense array indexed by row id (NaN: not read yet): row ids are AUTOINCREMENT, so it costs 4 bytes per id
    ever given, and a query's lookup is a gather where a binary search over 1M sorted ids took 1.6 ms (~5,000
    rows a query). A deleted row's entry stays: no posting names it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lens: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self._loaded = False

    def lengths(self, conn: Connection, rowids: IntArray) -> FloatArray:
        """Lengths of `rowids` (ascending, every one alive in the caller's snapshot)."""
        with self._lock:
            if not self._loaded:
                self._store(*self._read(conn, None))
                self._loaded = True
            table = self._lens
        out = np.full(rowids.size, np.nan, dtype=np.float32)
        inside = rowids < table.size
        out[inside] = table[rowids[inside]]
        missing = np.isnan(out)
        if missing.any():
            new_ids, new_lens = self._read(conn, rowids[missing])
            if not np.array_equal(new_ids, rowids[missing]):
                raise LookupError("a posting names a row that is not in the index")
            with self._lock:
                self._store(new_ids, new_lens)
            out[missing] = new_lens
        return out.astype(np.float64)

    def _store(self, ids: IntArray, lens: FloatArray) -> None:
        if not ids.size:
            return
        top = int(ids.max()) + 1
        if top > self._lens.size:  # grown by half again at least: rows arrive in small batches
            grown = np.full(max(top, self._lens.size * 3 // 2), np.nan, dtype=np.float32)
            grown[: self._lens.size] = self._lens
            self._lens = grown
        self._lens[ids] = lens

    @staticmethod
    def _read(conn: Connection, rowids: IntArray | None) -> tuple[IntArray, FloatArray]:
        if rowids is None:
            ids, lens = conn.execute(
                "SELECT group_concat(id), group_concat(kw_len) FROM"
                " (SELECT id, kw_len FROM chunks INDEXED BY chunks_kw_len WHERE kw_len IS NOT NULL ORDER BY id)"
            ).fetchone()
        else:
            ids, lens = conn.execute(
                "SELECT group_concat(id), group_concat(kw_len) FROM (SELECT id, kw_len FROM chunks"
                " INDEXED BY chunks_kw_len WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id)",
                (json.dumps([int(x) for x in rowids]),),
            ).fetchone()
        return _ints(ids), _ints(lens).astype(np.float64)
