"""Feeds the rows written after a scope's HNSW index was installed into it, off the write path.

A write appends its rows to the scope at once (searchable by the next query), and a background thread adds them
to the index afterwards (`wrote`), a few rows per hold of the index's lock, at a lower CPU priority, once writes
pause (or too many rows wait: QUIET_S, SOFT_PENDING). Adding a row
to a 1M-row index costs ~0.9 ms; in the write path that took the ingest rate at 1M to 0.70x an empty index's
(bench/retrieval/writes_at_size.py). Until a row is in the index, a search scores it exactly beside the index's
candidates (ScopeView.pending_from); past MAX_PENDING such rows a writer feeds the index itself. Rows are fed in
rowid order (rowids only grow), so the index holds every row up to `VectorScope.ann_upto` (ann_keeper.py relies
on it at a start). Removes stay in the write path (a tombstone, cheap).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.vector_cache import Vector, VectorScope

if TYPE_CHECKING:
    from ctxstore.adapters.local.ann_index import AnnIndex

ScopeKey = tuple[str, str, str]  # org, database, store
# Rows added or removed since an index's file was written (by a start's catch-up or by feeding) past which it is
# written again: ~1 s at 1M holding the index's lock, so not after every write; a crash's loss is re-fed at start.
SAVE_AFTER_CHANGES = 10_000
FEED_ROWS = 16  # rows added per hold of an index's lock: a search waits ~15 ms at most at 1M
FEED_NICENESS = 10  # the feeding thread's: ingestion's embedding and the queries come first
# Rows of a scope written but not yet in its index past which a writer feeds them itself (and so waits): a search
# scores the pending rows exactly, ~2 ms at this many, and the low-priority thread can fall behind a long ingest.
MAX_PENDING = 10_000
# The thread feeds once writes have paused this long, or past SOFT_PENDING rows whatever the writes: adding rows
# to a 1M-row index beside a burst of ingestion slowed its embedding, at nice 10 and 19 alike (the server used
# 6-26 % more CPU for the same 2,000 notes; the index's random reads of ~650 MB share the caches with it).
# writes_at_size at 1M: 0.84 and 0.85x an empty index's rate feeding beside the burst, 0.84-1.00x (0.94 over 6
# runs) waiting for the pause. Searches score the waiting rows exactly (~1 ms at 5,000).
QUIET_S = 0.5
SOFT_PENDING = 5_000


class AnnFeeder:
    def __init__(
        self,
        directory: Path,
        lock: threading.Lock,
        scopes: Callable[[], Iterable[tuple[ScopeKey, VectorScope]]],
        *,
        in_background: bool,
    ) -> None:
        self.directory = directory  # where the indexes' files are (saved past SAVE_AFTER_CHANGES)
        self._lock = lock  # the owner's cache lock: scopes change under it
        self._scopes = scopes  # the owner's cached scopes, read under `lock`
        self._in_background = in_background  # False: each write feeds at once (tests)
        self._wake, self._stop = threading.Event(), threading.Event()
        self._feeding = threading.Lock()  # one batch at a time: the thread's or a writer's
        self._thread: threading.Thread | None = None
        self._last_write = 0.0  # time.monotonic() of the last write

    def wrote(self) -> None:
        """Told after a write changed cached scopes: their new rows go into their indexes (at once in tests)."""
        if not self._in_background:
            self.feed()
            return
        self._last_write = time.monotonic()
        if self._thread is None:
            with self._feeding:  # one thread, seen by stop() only once started
                if self._thread is None:
                    thread = threading.Thread(target=self._feed_loop, name="ann-feed", daemon=True)
                    thread.start()
                    self._thread = thread
        self._wake.set()
        if self.backlog() > MAX_PENDING:
            self.feed(until=MAX_PENDING // 2)

    def backlog(self) -> int:
        """The most rows any scope holds that its index does not yet."""
        with self._lock:
            return max((s.n - s.fed_upto() for _, s in self._scopes() if s.ann is not None), default=0)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(60)

    def _feed_loop(self) -> None:
        with contextlib.suppress(OSError):  # Linux: a thread's own niceness
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), FEED_NICENESS)
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            while not self._stop.is_set() and self.backlog() < SOFT_PENDING:
                quiet = time.monotonic() - self._last_write
                if quiet >= QUIET_S:
                    break
                self._stop.wait(QUIET_S - quiet)
            self.feed()

    def feed(self, until: int = 0) -> int:
        """Add the rows written since each scope's index was last fed, until `until` or fewer are left; answers the
        rows added."""
        from ctxstore.adapters.local.ann_index import scope_file

        with self._lock:
            scopes = [(key, s) for key, s in self._scopes() if s.ann is not None]
        added = 0
        for key, scope in scopes:
            while not self._stop.is_set():
                with self._feeding:
                    with self._lock:
                        batch = _pending(scope, until)
                    if batch is None:
                        break
                    ann, upto, rowids, rows = batch
                    ann.add(rowids, rows)
                    added += len(rowids)
                    with self._lock:
                        if scope.ann is ann:
                            scope.ann_upto = max(scope.ann_upto, upto)
                        ann.remove(np.setdiff1d(rowids, scope.ids[scope.alive_positions(rowids)]))  # deleted meanwhile
            if scope.ann is not None and scope.ann.changes >= SAVE_AFTER_CHANGES:  # bounds a crash's re-feeding
                scope.ann.save(scope_file(self.directory, key))
        return added


def _pending(scope: VectorScope, until: int = 0) -> tuple[AnnIndex, int, npt.NDArray[np.int64], Vector] | None:
    """The next rows to add to the scope's index, while more than `until` wait: (index, last rowid covered, alive
    rowids, their vectors)."""
    if scope.ann is None:
        return None
    start = scope.fed_upto()
    if scope.n - start <= until:
        return None
    end = min(scope.n, start + FEED_ROWS)
    at = start + np.flatnonzero(scope.alive[start:end])
    return scope.ann, int(scope.ids[end - 1]), scope.ids[at].copy(), np.array(scope.mat[at])
