"""SqliteDb keeps one connection per live thread: a pool that recycles threads must not leak descriptors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ctxstore.adapters.local.sqlite_db import SqliteDb


def _touch(db: SqliteDb) -> None:
    db.conn.execute("SELECT 1").fetchone()


def test_connections_of_finished_threads_are_closed(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "x.db")
    _touch(db)  # the test thread's own connection stays
    for _ in range(200):  # like anyio retiring idle worker threads and starting new ones
        t = threading.Thread(target=_touch, args=(db,))
        t.start()
        t.join()
    _touch(db)
    assert db.open_connections() <= 2
    t = threading.Thread(target=_touch, args=(db,))
    t.start()
    t.join()
    assert db.open_connections() <= 2
    db.close()
    assert db.open_connections() == 0


def test_live_threads_keep_their_connections(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "x.db")
    ready = threading.Barrier(5, timeout=30)
    release = threading.Event()

    def hold() -> None:
        _touch(db)
        ready.wait()
        release.wait(30)
        _touch(db)  # still usable: not closed under a live thread

    # Daemon threads with bounded waits: a failure here must never keep the test process alive.
    threads = [threading.Thread(target=hold, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    ready.wait()
    assert db.open_connections() == 4
    _touch(db)
    assert db.open_connections() == 5
    release.set()
    for t in threads:
        t.join()
    db.close()


def test_threads_opening_a_fresh_file_at_once_all_get_wal_connections(tmp_path: Path) -> None:
    # Switching a new file to WAL takes an exclusive lock SQLite refuses without waiting: done once up front.
    errors: list[BaseException] = []
    for i in range(30):
        db = SqliteDb(tmp_path / f"fresh{i}.db")
        start = threading.Barrier(6, timeout=30)

        def first_use(db: SqliteDb = db, start: threading.Barrier = start) -> None:
            try:
                start.wait()
                assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            except BaseException as exc:  # collected: a thread's exception would otherwise be lost
                errors.append(exc)

        threads = [threading.Thread(target=first_use, daemon=True) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        db.close()
    assert errors == []


def test_a_full_database_is_a_retryable_storage_error(tmp_path: Path) -> None:
    """SQLITE_FULL (here from max_page_count, the same code a full disk gives) maps to StoreUnavailable with a
    long Retry-After, and the failed transaction leaves nothing behind."""
    from ctxstore.domain.errors import OUT_OF_SPACE_RETRY_AFTER_S, StoreUnavailable

    db = SqliteDb(tmp_path / "full.db")
    db.executescript("CREATE TABLE t (v BLOB)")
    with db.write() as conn:
        conn.execute("INSERT INTO t VALUES (zeroblob(1000))")
    db.conn.execute("PRAGMA max_page_count = 16")
    with pytest.raises(StoreUnavailable) as info, db.write() as conn:
        for _ in range(200):
            conn.execute("INSERT INTO t VALUES (zeroblob(4000))")
    assert info.value.retry_after_s == OUT_OF_SPACE_RETRY_AFTER_S
    assert db.conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
    with db.write() as conn:  # the connection is usable again
        conn.execute("DELETE FROM t")
