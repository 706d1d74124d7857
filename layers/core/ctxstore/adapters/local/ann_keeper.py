"""Brings each large vector scope its HNSW index (ann_index.py): loaded or built off the query path, saved.

The owner (SqliteSearchIndex) calls `ensure` when it uses a scope; with `min_rows` set (None: no index), a
scope of that many live rows or more
without an index gets one in a background thread, so queries keep answering by the scan or the shortlist
meanwhile. The thread loads the scope's file (or builds from the rows when it is unusable), catches it up
with the rows without the owner's lock, then installs it under the lock, which adds the writes made
meanwhile (VectorScope.install_ann). Files live in `directory`, one per scope.

A load from a saved file is waited for (`wait_loaded`): the start's warm-up waits for it, so do queries for a
few seconds. At 1M rows it takes ~1 s (usearch holds the GIL meanwhile), where a query by the shortlist on a
cold start took seconds. A build from the rows (minutes) is never waited for. After a load, the file is
written again only when the catch-up was large: a save of 1M rows takes ~1 s and holds the index's lock, so
searches wait; a small catch-up is cheap to repeat at the next start, and a clean stop saves (`save`).

Feeding: a write appends its rows to the scope at once (searchable by the next query), and a background thread
adds them to the index afterwards (`wrote`), a few rows per hold of the index's lock, at a lower CPU priority.
Adding a row to a 1M-row index costs ~0.9 ms; in the write path that took the ingest rate at 1M to 0.70x an
empty index's (bench/retrieval/writes_at_size.py). Until a row is in the index, a search scores it exactly
beside the index's candidates (ScopeView.pending_from). Removes stay in the write path (a tombstone, cheap).
The index is fed in rowid order (rowids only grow), so a saved file holds every row up to its last key: a start
after a crash loads it and leaves the rows written since to the feeder instead of waiting for them (200 rows
after a kill -9 at 1M: ~0.2 s of a 5 s start).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.mapped_rows import release_pages
from ctxstore.adapters.local.vector_cache import Vector, VectorScope

if TYPE_CHECKING:
    from ctxstore.adapters.local.ann_index import AnnIndex

ScopeKey = tuple[str, str, str]  # org, database, store
# Rows added or removed since the file was written (by a load's catch-up or by feeding) past which it is written
# again: ~1 s at 1M holding the index's lock, so not after every write; what a crash loses is re-fed at the start.
SAVE_AFTER_CATCH_UP = 10_000
FEED_ROWS = 16  # rows added per hold of an index's lock: a search waits ~15 ms at most at 1M
FEED_NICENESS = 10  # the feeding thread's: ingestion's embedding and the queries come first
# Rows of a scope written but not yet in its index past which a writer feeds them itself (and so waits): a search
# scores the pending rows exactly, ~2 ms at this many, and the low-priority thread can fall behind a long ingest.
MAX_PENDING = 10_000


class AnnKeeper:
    def __init__(
        self,
        directory: Path,
        lock: threading.Lock,
        *,
        min_rows: int | None,
        in_background: bool,
        scopes: Callable[[], Iterable[tuple[ScopeKey, VectorScope]]] = list,
    ) -> None:
        self.directory = directory
        self._scopes = scopes  # the owner's cached scopes, read under `lock`
        self.min_rows = min_rows
        self._lock = lock  # the owner's cache lock: scopes change under it
        self._in_background = in_background  # False: the query that needs the index builds it (tests)
        self._builds: dict[ScopeKey, threading.Thread] = {}
        self._loads: dict[ScopeKey, threading.Event] = {}  # loads from a saved file; set once installed
        self._wake, self._stop = threading.Event(), threading.Event()
        self._feeding = threading.Lock()  # one batch at a time: the thread's or a writer's
        self._feeder: threading.Thread | None = None
        if directory.is_dir():  # saves a crash cut short (AnnIndex.save), files of an older format
            from ctxstore.adapters.local.ann_index import stale_files

            for stale in stale_files(directory):
                stale.unlink(missing_ok=True)

    def ensure(self, key: ScopeKey, cache: VectorScope | None) -> None:
        """Start loading or building the scope's index when it is large enough and has none."""
        if self.min_rows is None or cache is None or cache.ann is not None or cache.live < self.min_rows:
            return
        from ctxstore.adapters.local.ann_index import scope_file  # usearch: only where the index is on

        loaded = threading.Event()
        if not self._in_background:
            self._build(key, cache, loaded)
            return
        with self._lock:
            running = self._builds.get(key)
            if running is not None and running.is_alive():
                return
            thread = threading.Thread(target=self._build, args=(key, cache, loaded), name="ann-build", daemon=True)
            self._builds[key] = thread
            if scope_file(self.directory, key).exists():
                self._loads[key] = loaded
            else:
                self._loads.pop(key, None)
        thread.start()

    def wait_loaded(self, key: ScopeKey, timeout: float | None) -> None:
        """Wait (at most `timeout` s) for a load of the scope's saved index under way; at once otherwise."""
        loaded = self._loads.get(key)
        if loaded is not None:
            loaded.wait(timeout)

    def _build(self, key: ScopeKey, cache: VectorScope, loaded: threading.Event) -> None:
        from ctxstore.adapters.local.ann_index import AnnIndex, scope_file  # usearch: only where the index is on

        try:
            path = scope_file(self.directory, key)
            with self._lock:
                ids, mat, at = cache.alive_rows()
                from_file = cache.file_rows.rows if cache.file_rows is not None else 0  # rows of `mat` in its file
            ann = AnnIndex.load(path, cache.dim)
            upto: int | None = None
            if ann is None:  # unusable or gone: a build from the rows (minutes) is not waited for
                loaded.set()
                ann = AnnIndex.build(cache.dim, ids, lambda block: mat[at[block]], threads=1)  # queries keep a core
                changed = len(ids)
            else:  # the bulk of a catch-up, without the lock; rows past the file's last are fed after
                upto = ann.last_key()
                older = ids[: np.searchsorted(ids, upto, side="right")]
                changed = sum(ann.sync(older, lambda wanted: mat[at[np.searchsorted(ids, wanted)]]))
            release_pages(mat, from_file)  # the build read every row; the index's queries read only their candidates
            with self._lock:
                changed += sum(cache.install_ann(ann, upto))  # the writes made meanwhile
        finally:
            loaded.set()
        self.wrote()  # the rows written since the file was saved
        if changed >= SAVE_AFTER_CATCH_UP:
            ann.save(path)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the builds under way; answers whether they all ended."""
        with self._lock:
            threads = list(self._builds.values())
        for thread in threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in threads)

    def save(self, scopes: Iterable[tuple[ScopeKey, VectorScope]]) -> int:
        """Save the indexes changed since they were loaded or saved (a restart then catches up less)."""
        with self._lock:
            changed = [(key, c.ann) for key, c in scopes if c.ann is not None and c.ann.dirty]
        if changed:
            from ctxstore.adapters.local.ann_index import scope_file

        for key, ann in changed:
            ann.save(scope_file(self.directory, key))
        return len(changed)

    def wrote(self) -> None:
        """Told after a write changed cached scopes: their new rows go into their indexes (at once in tests)."""
        if self.min_rows is None:
            return
        if not self._in_background:
            self.feed()
            return
        if self._feeder is None:
            with self._feeding:  # one thread, seen by stop() only once started
                if self._feeder is None:
                    feeder = threading.Thread(target=self._feed_loop, name="ann-feed", daemon=True)
                    feeder.start()
                    self._feeder = feeder
        self._wake.set()
        if self.backlog() > MAX_PENDING:
            self.feed(until=MAX_PENDING // 2)

    def backlog(self) -> int:
        """The most rows any scope holds that its index does not yet."""
        with self._lock:
            return max((s.n - _fed_upto(s) for _, s in self._scopes() if s.ann is not None), default=0)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._feeder is not None:
            self._feeder.join(60)

    def _feed_loop(self) -> None:
        with contextlib.suppress(OSError):  # Linux: a thread's own niceness
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), FEED_NICENESS)
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
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
            if scope.ann is not None and scope.ann.changes >= SAVE_AFTER_CATCH_UP:  # bounds a crash's re-feeding
                scope.ann.save(scope_file(self.directory, key))
        return added


def _fed_upto(scope: VectorScope) -> int:
    """The position of the scope's first row not in its index."""
    return int(np.searchsorted(scope.ids[: scope.n], scope.ann_upto, side="right"))


def _pending(scope: VectorScope, until: int = 0) -> tuple[AnnIndex, int, npt.NDArray[np.int64], Vector] | None:
    """The next rows to add to the scope's index, while more than `until` wait: (index, last rowid covered, alive
    rowids, their vectors)."""
    if scope.ann is None:
        return None
    start = _fed_upto(scope)
    if scope.n - start <= until:
        return None
    end = min(scope.n, start + FEED_ROWS)
    at = start + np.flatnonzero(scope.alive[start:end])
    return scope.ann, int(scope.ids[end - 1]), scope.ids[at].copy(), np.array(scope.mat[at])
