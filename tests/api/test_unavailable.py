"""A storage dependency that stays busy answers 503 SERVICE_UNAVAILABLE, and nothing is half-written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.app import make_app


def test_locked_store_is_503_with_retry_after(tmp_path: Path) -> None:
    la = make_app(tmp_path / "d", sqlite_busy_timeout_ms=100)
    try:
        blocker = sqlite3.connect(la.data_dir / "records.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        r = la.client.post("/databases", json={"database": "acme"}, headers=la.headers())
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "SERVICE_UNAVAILABLE" and r.json()["success"] is False
        assert r.headers["retry-after"] == "1"
        blocker.execute("ROLLBACK")
        blocker.close()
        # After the lock clears the same request succeeds: the failed attempt left nothing behind.
        r = la.client.post("/databases", json={"database": "acme"}, headers=la.headers())
        assert r.status_code == 202
    finally:
        la.close()
