"""One SQLite database file shared by the local adapters: WAL, a connection per thread, short transactions."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxstore.domain.errors import OUT_OF_SPACE_RETRY_AFTER_S, StoreUnavailable


def storage_error(exc: sqlite3.Error) -> StoreUnavailable | None:
    """The retryable form of a SQLite error: out of space (SQLITE_FULL) or locked past the busy timeout."""
    text = str(exc).lower()
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in text:
        return StoreUnavailable(f"out of disk space: {exc}", retry_after_s=OUT_OF_SPACE_RETRY_AFTER_S)
    if "locked" in text or "busy" in text:
        return StoreUnavailable(f"record store busy: {exc}")
    return None


class SqliteDb:
    def __init__(self, path: Path, *, busy_timeout_ms: int = 30000) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._lock = threading.Lock()
        # Each connection with the thread that owns it: threads of a pool come and go (anyio recycles idle
        # ones), so a dead thread's connection is closed when the next one opens instead of leaking its fd.
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._enable_wal()

    def _enable_wal(self) -> None:
        """Switch the file to WAL once, up front: WAL is a property of the file, and the switch takes an
        exclusive lock that SQLite refuses at once (no busy wait) when other connections open concurrently."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise StoreUnavailable(f"record store busy: {exc}") from exc
                time.sleep(0.01)
            finally:
                conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
        # NORMAL in WAL mode survives a process kill; only an OS crash can lose the last commits.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            alive = []
            for owner, other in self._all:
                if owner.is_alive():
                    alive.append((owner, other))
                else:
                    _close_quietly(other)
            alive.append((threading.current_thread(), conn))
            self._all = alive
        return conn

    def open_connections(self) -> int:
        with self._lock:
            return len(self._all)

    @property
    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the lock up front, so conditions checked inside hold."""
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            # Another writer held the lock past the busy timeout: a retryable condition, not a bug.
            raise storage_error(exc) or StoreUnavailable(f"record store busy: {exc}") from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            _rollback_quietly(conn)
            mapped = storage_error(exc)  # a full disk fails inserts and commits alike: retry later
            if mapped is not None:
                raise mapped from exc
            raise
        except BaseException:
            _rollback_quietly(conn)
            raise

    def executescript(self, sql: str) -> None:
        self.conn.executescript(sql)

    def close(self) -> None:
        with self._lock:
            for _, conn in self._all:
                _close_quietly(conn)
            self._all.clear()
        self._local = threading.local()


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite rolls a failed transaction back itself when it cannot


def _close_quietly(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except sqlite3.Error:
        pass
