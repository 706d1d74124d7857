"""What the keyword lane reads besides FTS5's doclists: document frequencies, term frequencies, lengths.

Reading a term's postings through FTS5's bm25() costs two B-tree lookups per matching row (its column
sizes, and the row's length from `chunks`), and fts5vocab's 'row' table counts a term's documents by
walking its whole doclist. At 100k chunks that was 15 of the keyword lane's 20 ms (docs/benchmarks.md,
issue 15). Instead:

- `kw_df` holds each scoped token's document count, kept in the writes' own transactions, so a search
  reads its statistics in the same snapshot as the postings;
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
from collections.abc import Iterable, Sequence
from sqlite3 import Connection

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local import keyword_df_copy as df_copy

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# `merged`: the count as the term-first copy holds it (keyword_df_copy.py).
DF_TABLE = (
    "CREATE TABLE IF NOT EXISTS kw_df (token TEXT PRIMARY KEY, docs INTEGER NOT NULL,"
    " merged INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID"
)
# Per connection: fts5vocab tables over the keyword index (temp: they are views of main's kw_fts).
VOCAB_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kw_rows USING fts5vocab(main, kw_fts, 'row')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kw_postings USING fts5vocab(main, kw_fts, 'instance')",
)


def row_tokens(kw_title: str | None, kw_text: str | None) -> set[str]:
    """The distinct scoped tokens of one row (each counts once towards its document frequency)."""
    return set((kw_title or "").split()) | set((kw_text or "").split())


def change_doc_freqs(conn: Connection, change: Counter[str], scopes: Iterable[int]) -> None:
    """Add the counts (negative for deleted rows) of the tokens of these collections, in the caller's transaction;
    drop tokens left at zero. The collections' term-first copy is then out of date (keyword_df_copy.py)."""
    deltas = [(token, n) for token, n in change.items() if n]
    if not deltas:
        return
    df_copy.note_changes(conn, scopes)
    conn.executemany(
        "INSERT INTO kw_df (token, docs) VALUES (?, ?) ON CONFLICT (token) DO UPDATE SET docs = docs + excluded.docs",
        deltas,
    )
    gone = [token for token, n in deltas if n < 0]
    if gone:
        conn.execute(  # a token the copy still counts stays, at 0, until merged (keyword_df_copy.py)
            "DELETE FROM kw_df WHERE docs <= 0 AND merged = 0 AND token IN (SELECT value FROM json_each(?))",
            (json.dumps(gone),),
        )


def fill_doc_freqs(conn: Connection) -> None:
    """Derive `kw_df` from the index itself (files written before it existed), in the caller's transaction."""
    for statement in VOCAB_TABLES:
        conn.execute(statement)
    df_copy.create(conn)
    conn.execute("DELETE FROM kw_df")
    conn.execute("INSERT INTO kw_df (token, docs) SELECT term, doc FROM temp.kw_rows WHERE doc > 0")
    df_copy.reset(conn)


def doc_freqs(conn: Connection, tokens: Iterable[str]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT token, docs FROM kw_df WHERE token IN (SELECT value FROM json_each(?)) AND docs > 0",
        (json.dumps(list(tokens)),),
    ).fetchall()
    return {str(t): int(d) for t, d in rows}


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
