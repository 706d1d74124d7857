"""SqliteDb keeps one connection per live thread: a pool that recycles threads must not leak descriptors."""

from __future__ import annotations

import threading
from pathlib import Path

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
    ready = threading.Barrier(5)
    release = threading.Event()

    def hold() -> None:
        _touch(db)
        ready.wait()
        release.wait()
        _touch(db)  # still usable: not closed under a live thread

    threads = [threading.Thread(target=hold) for _ in range(4)]
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
