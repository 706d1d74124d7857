"""When the search index saves its scopes' vector snapshots: at a clean close, and while `serve` runs.

Without saves between stops, a start after `kill -9` found no usable snapshot and read a 1M-chunk scope from
SQLite (33 s, docs/benchmarks.md). With them, the newest snapshot is at most `DUE_SHARE` of the scope behind,
and catching it up (vector_loading.py) reads only that. A save writes the scope's matrix whole (1.5 GB at 1M),
so it is due only for large scopes that changed enough: small scopes read from SQLite in well under a second.
Saves are captured under the cache's lock and written outside it (queries and writes go on), one at a time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from ctxstore.adapters.local import vector_snapshot
from ctxstore.adapters.local.vector_cache import VectorScope

log = logging.getLogger("ctxstore.search.vectors")

ScopeKey = tuple[str, str, str]
DUE_MIN_ROWS = 20_000  # scopes smaller than this read from SQLite in < 0.5 s: never saved between stops
DUE_SHARE = 0.05  # a save is due once this share of the scope's rows was written or deleted since the last one
DUE_MIN_CHANGES = 5_000


class SnapshotKeeper:
    def __init__(self, folder: Path, cache_lock: threading.Lock) -> None:
        self._folder = folder
        self._cache_lock = cache_lock
        self._unsaved: dict[ScopeKey, int] = {}  # rows changed since the scope's newest snapshot
        self._saving = threading.Lock()  # one save at a time: a save removes the matrix files it replaces
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- told by the index, under its cache lock --------------------------------------------------

    def loaded(self, key: ScopeKey, from_sqlite: int) -> None:
        self._unsaved[key] = from_sqlite

    def changed(self, key: ScopeKey, rows: int) -> None:
        self._unsaved[key] = self._unsaved.get(key, 0) + rows

    def forget(self, key: ScopeKey) -> None:
        self._unsaved.pop(key, None)

    def map_read_scope(self, key: ScopeKey, scope: VectorScope, from_sqlite: int) -> tuple[VectorScope, int]:
        """A large scope read whole from SQLite, saved and mapped back from its snapshot: (scope, rows unsaved).

        Read from SQLite, the matrix sits in anonymous memory (1.5 GB at 1M) until a later start maps a snapshot;
        an HNSW index loaded or built beside it took a first start at 1M to a 2.7 GB peak. Saved at once (a few
        seconds at 1M, on a start that read SQLite for half a minute), it is mapped like any snapshot and read by
        pread. The codes are made first, from memory, so the snapshot carries them and nothing reads every row
        through the mapping later. Call under the index's locks.

        A periodic save under way holds the save lock and then waits for the cache lock its caller holds: this
        does not wait for it (a deadlock) but leaves the scope to the next periodic save."""
        if from_sqlite < scope.n or scope.live < DUE_MIN_ROWS:
            return scope, from_sqlite
        if not self._saving.acquire(blocking=False):
            return scope, from_sqlite
        try:
            scope.view(approximate=True)  # the shortlist's codes
            if not self._write(key, vector_snapshot.capture(scope)):
                return scope, from_sqlite
        finally:
            self._saving.release()
        mapped = vector_snapshot.load(self._folder, key, scope.generation)
        return (scope, from_sqlite) if mapped is None else (mapped, 0)

    # -- saves ------------------------------------------------------------------------------------

    def is_due(self, scope: VectorScope, unsaved: int) -> bool:
        return scope.live >= DUE_MIN_ROWS and unsaved >= max(DUE_MIN_CHANGES, int(scope.live * DUE_SHARE))

    def save_due(self, scopes: Callable[[], Iterable[tuple[ScopeKey, VectorScope]]]) -> int:
        """Save every scope that is due; answers how many were saved. `scopes` is read under the cache lock."""
        saved = 0
        with self._saving:
            with self._cache_lock:
                due = [
                    (key, vector_snapshot.capture(scope), self._unsaved.get(key, 0))
                    for key, scope in scopes()
                    if self.is_due(scope, self._unsaved.get(key, 0))
                ]
            for key, cap, unsaved in due:
                if self._write(key, cap):
                    saved += 1
                    with self._cache_lock:  # changes made while writing stay counted
                        self._unsaved[key] = max(0, self._unsaved.get(key, 0) - unsaved)
        return saved

    def save_current(self, scopes: Iterable[tuple[ScopeKey, VectorScope]]) -> int:
        """At a clean close (the caller holds the index's locks): every scope not already saved as it is."""
        saved = 0
        with self._saving:
            for key, scope in scopes:
                if vector_snapshot.is_saved(self._folder, key, scope):
                    continue
                if self._write(key, vector_snapshot.capture(scope)):
                    saved += 1
                    self._unsaved[key] = 0
        return saved

    def _write(self, key: ScopeKey, cap: vector_snapshot.Capture) -> bool:
        try:
            vector_snapshot.write(self._folder, key, cap)
            return True
        except OSError as exc:  # a full disk: the next start catches up an older snapshot or reads SQLite
            log.warning("vector snapshot of %s/%s not saved: %s", key[1], key[2], exc)
            return False

    # -- while serve runs -------------------------------------------------------------------------

    def start(self, every_s: float, scopes: Callable[[], Iterable[tuple[ScopeKey, VectorScope]]]) -> None:
        def run() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.save_due(scopes)
                except Exception:  # a bad scope must not end the saves of the others
                    log.exception("periodic vector snapshots failed")

        self._thread = threading.Thread(target=run, name="vector-snapshots", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
