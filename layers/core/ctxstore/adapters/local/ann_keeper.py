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

Rows written after the index is installed reach it through an AnnFeeder (ann_feeder.py), in rowid order, so a
saved file holds every row up to its last key: a start after a crash loads it and leaves the rows written since
to the feeder instead of waiting for them (200 rows after a kill -9 at 1M: ~0.2 s of a 5 s start).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from ctxstore.adapters.local import ann_feeder
from ctxstore.adapters.local.ann_feeder import AnnFeeder, ScopeKey
from ctxstore.adapters.local.mapped_rows import release_pages
from ctxstore.adapters.local.vector_cache import VectorScope


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
        self.min_rows = min_rows
        self._lock = lock  # the owner's cache lock: scopes change under it
        self._in_background = in_background  # False: the query that needs the index builds it (tests)
        self._builds: dict[ScopeKey, threading.Thread] = {}
        self._loads: dict[ScopeKey, threading.Event] = {}  # loads from a saved file; set once installed
        # Rows written after an index is installed (None: no index, nothing to feed).
        self.feeder = AnnFeeder(directory, lock, scopes, in_background=in_background) if min_rows is not None else None
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
        if changed >= ann_feeder.SAVE_AFTER_CHANGES:
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
        """Told after a write changed cached scopes (AnnFeeder.wrote)."""
        if self.feeder is not None:
            self.feeder.wrote()

    def stop(self) -> None:
        if self.feeder is not None:
            self.feeder.stop()
