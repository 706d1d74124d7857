"""Scheduler on SQLite: one row per (org, schedule id) in the records database, polled by `ctxstore serve`.

`due` hands out the rows whose time has come and moves each to now + its interval in the same write
transaction, so a schedule fires once per interval even if several pollers ask; the owner (the connector
service) re-anchors `next_at` with `upsert` when it knows better (a chunk continues soon, a sync finished).
Rows survive a restart: a schedule missed while the server was down fires on the first poll after it.
"""

from __future__ import annotations

import json
from typing import Any

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.ports.scheduler import Schedule

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    org TEXT NOT NULL,
    schedule_id TEXT NOT NULL,
    every_s INTEGER NOT NULL,
    next_at REAL NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (org, schedule_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_at);
"""


class SqliteScheduler:
    def __init__(self, db: SqliteDb) -> None:
        self._db = db
        db.executescript(_SCHEMA)

    def upsert(self, org: str, schedule_id: str, *, every_s: int, next_at: float, payload: dict[str, Any]) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO schedules (org, schedule_id, every_s, next_at, payload) VALUES (?,?,?,?,?)"
                " ON CONFLICT (org, schedule_id) DO UPDATE SET every_s=excluded.every_s,"
                " next_at=excluded.next_at, payload=excluded.payload",
                (org, schedule_id, int(every_s), float(next_at), json.dumps(payload)),
            )

    def cancel(self, org: str, schedule_id: str) -> bool:
        with self._db.write() as conn:
            cur = conn.execute("DELETE FROM schedules WHERE org=? AND schedule_id=?", (org, schedule_id))
            return cur.rowcount > 0

    def due(self, now: float, *, limit: int = 100) -> list[Schedule]:
        # Cheap read first: an idle server polls every tick and should not take the write lock for nothing.
        if self._db.conn.execute("SELECT 1 FROM schedules WHERE next_at<=? LIMIT 1", (now,)).fetchone() is None:
            return []
        out: list[Schedule] = []
        with self._db.write() as conn:
            rows = conn.execute(
                "SELECT org, schedule_id, every_s, next_at, payload FROM schedules WHERE next_at<=?"
                " ORDER BY next_at LIMIT ?",
                (now, limit),
            ).fetchall()
            for org, schedule_id, every_s, next_at, payload in rows:
                conn.execute(
                    "UPDATE schedules SET next_at=? WHERE org=? AND schedule_id=?",
                    (now + int(every_s), org, schedule_id),
                )
                out.append(Schedule(schedule_id, org, int(every_s), float(next_at), json.loads(payload)))
        return out

    def next_at(self, org: str, schedule_id: str) -> float | None:
        """The stored time of one schedule (tests and diagnostics)."""
        row = self._db.conn.execute(
            "SELECT next_at FROM schedules WHERE org=? AND schedule_id=?", (org, schedule_id)
        ).fetchone()
        return float(row[0]) if row else None

    def count(self) -> int:
        return int(self._db.conn.execute("SELECT COUNT(*) FROM schedules").fetchone()[0])
