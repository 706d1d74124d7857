"""Merges the keyword index's FTS5 segments into one while nothing is being written.

FTS5 adds a segment per write transaction and merges them lazily, so an index written in many small
transactions keeps many: 24 at 100k chunks ingested through the API, 19-22 at 1M. Each token a query reads
probes every segment (a `kw_fts_idx` lookup each); into 100 collections of a 1M index that was ~70 % of the
keyword lane, and one segment halved the lane's time (docs/benchmarks.md, issue 28 goal 7).

The index now writes one segment per transaction (sqlite_search_sql.KW_INSERT; before, one per chunk row),
and FTS5's own merging keeps 1-16 small ones beside the large. So once no write arrived for `idle_s`, an
index of `MIN_SEGMENTS` segments or more is merged into one with FTS5's incremental 'merge' command: a
negative page count starts a merge of every segment, all levels at once (what 'optimize' does in one go),
and positive counts continue it, `pages` (4 KB each) per step, each step a short write transaction of its
own, so a writer waits for one step at most. A write ends the run between steps; FTS5 keeps the merge
started, and the next idle period continues it. A merge rewrites the whole index (~1 GB at 1M), so it is due
again once `SHARE` of the rows are new since the last (`kw_merge` keeps where that was, across starts):
each row is rewritten about 1 / SHARE more times as the index grows, and only while nothing is written.
Deletes and re-ingests of a few rows add segments without adding rows, so an index of `MIN_SEGMENTS` or more is
also merged once `MAX_AGE_S` have passed since its last merge (or since the start): at 1M chunks 9 small segments
beside the large one doubled a 100-collection query's postings read (4.1 -> 8.6 ms for 385 tokens), and the whole
merge took 7.7 s (bench/results/issue28_sixth_pass.json). That bounds the rewriting to one a period while small
writes keep coming. Each idle period first merges the keyword lane's pending document-frequency changes into their
term-first copy (keyword_df_copy.py), in batches of short transactions too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ctxstore.adapters.local import keyword_df_copy as df_copy
from ctxstore.adapters.local.sqlite_db import SqliteDb

log = logging.getLogger("ctxstore.search.keywords")

MIN_SEGMENTS = 8
PAGES = 256  # ~1 MB written per step: a few tens of ms
IDLE_S = 10.0
YIELD_S = 0.002  # between steps, for a writer waiting on the lock
SHARE = 0.1  # rows new since the last merge, as a share of the rows then
MAX_AGE_S = 3600.0  # many segments but few new rows: merged again after this long
MIN_NEW_ROWS = 1_000
STATE = "CREATE TABLE IF NOT EXISTS kw_merge (id INTEGER PRIMARY KEY CHECK (id = 1), max_id INTEGER NOT NULL)"
_STRUCTURE = 10  # FTS5's structure record: its rowid in the %_data table (fts5_index.c)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint (big-endian groups of 7 bits, the ninth byte whole): the value and where the next one starts."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def segment_count(db: SqliteDb) -> int:
    """Segments of the keyword index: the structure record is a 4-byte cookie, then levels and segments."""
    row = db.conn.execute("SELECT block FROM kw_fts_data WHERE id=?", (_STRUCTURE,)).fetchone()
    if row is None or len(row[0]) < 6:
        return 0
    block = bytes(row[0])
    at = 4
    if block[4:8] == b"\xff\x00\x00\x01":  # the second structure format (SQLite 3.45+) marks itself after the cookie
        at = 8
    _levels, at = _varint(block, at)
    segments, _ = _varint(block, at)
    return segments


class KeywordMerger:
    def __init__(
        self, db: SqliteDb, write_lock: threading.Lock, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._db = db
        db.conn.execute(STATE)
        self._write_lock = write_lock  # the index's in-process writers: a step runs between their writes
        self.min_segments = MIN_SEGMENTS
        self.pages = PAGES
        self.idle_s = IDLE_S
        self.share, self.min_new_rows = SHARE, MIN_NEW_ROWS
        self.max_age_s = MAX_AGE_S
        self.df_batch = df_copy.MERGE_BATCH
        self._clock = clock
        self._last_write = clock()
        self._merged_at = clock()  # the last merge this process finished (the start before one)
        self._unfinished: int | None = None  # a write broke off the merge started at this max(id): continue it
        self.steps = 0  # merge steps that did work, since the start
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wrote(self) -> None:
        """Told by the index after each write (under its write lock): merging waits for the next idle period."""
        self._last_write = self._clock()

    def idle(self) -> bool:
        return self._clock() - self._last_write >= self.idle_s and not self._stop.is_set()

    def _step(self, pages: int) -> bool:
        """One merge step in its own transaction; answers whether it did any work (FTS5's documented test)."""
        with self._write_lock, self._db.write() as conn:
            before = conn.total_changes
            conn.execute("INSERT INTO kw_fts (kw_fts, rank) VALUES ('merge', ?)", (pages,))
            return conn.total_changes - before >= 2

    def _due(self) -> int | None:
        """The max(id) of the rows a merge would start at, when one is due; None when not."""
        if segment_count(self._db) < self.min_segments:
            return None
        conn = self._db.conn
        (max_id,) = conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()
        row = conn.execute("SELECT max_id FROM kw_merge WHERE id = 1").fetchone()
        few_new = row is not None and max_id - row[0] < max(self.min_new_rows, self.share * row[0])
        if few_new and self._clock() - self._merged_at < self.max_age_s:
            return None
        return int(max_id)

    def merge_doc_freqs(self) -> int:
        """Merge the pending document-frequency changes into the term-first copy (keyword_df_copy.py) while no write
        arrives, a batch a transaction; answers the tokens merged."""
        merged = 0
        while self.idle():
            with self._write_lock, self._db.write() as conn:
                n = df_copy.merge_pending(conn, self.df_batch)
            if n == 0:
                break
            merged += n
            self._stop.wait(YIELD_S)
        if merged:
            log.info("keyword index: %d document-frequency changes merged into the term-first copy", merged)
        return merged

    def merge_while_idle(self) -> int:
        """Merge the index into one segment while no write arrives, when due; answers the steps that did work. The
        pending document-frequency changes are merged first (merge_doc_freqs)."""
        if not self.idle():
            return 0
        self.merge_doc_freqs()
        at = self._unfinished if self._unfinished is not None else self._due()
        if at is None:
            return 0
        started = time.perf_counter()
        steps = 0
        # A negative count starts a merge of every segment, all levels at once; a positive one continues it.
        work = self._step(self.pages if self._unfinished is not None else -self.pages)
        while work:
            steps += 1
            self.steps += 1
            # A lock is no queue: re-taken at once, it would keep a waiting writer out for the whole merge.
            self._stop.wait(YIELD_S)
            if not self.idle():
                break
            work = self._step(self.pages)
        self._unfinished = at if work else None
        if not work:
            with self._write_lock, self._db.write() as conn:
                conn.execute("INSERT OR REPLACE INTO kw_merge (id, max_id) VALUES (1, ?)", (at,))
            self._merged_at = self._clock()
        log.info(
            "keyword index: %d merge steps in %.1f s, %d segments now%s",
            steps,
            time.perf_counter() - started,
            segment_count(self._db),
            " (a write arrived: continued when idle again)" if work else "",
        )
        return steps

    def start(self, every_s: float) -> None:
        def run() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.merge_while_idle()
                except Exception:  # a busy or full store: the next period tries again
                    log.exception("keyword index merge failed")

        self._thread = threading.Thread(target=run, name="keyword-merge", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
