"""WorkQueue on SQLite: leased jobs, unique ids per queue, delayed retries, a dead-letter state."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.ports.work_queue import Job, WorkSignal

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    queue TEXT NOT NULL,
    job_id TEXT NOT NULL,
    org TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL,            -- ready | leased | dead
    run_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_token TEXT,
    last_error TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (queue, job_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (queue, state, run_at);
"""


# Due jobs: ready ones, and leased ones whose lease ran out (their worker died). Each state is read as a
# range of the (queue, state, run_at) index: `state IN (...) ORDER BY run_at` made SQLite walk and sort
# the queue's every job on each claim (0.26 ms at 2,000 queued, growing with the queue).
_DUE = """
SELECT job_id, org, payload, attempts FROM (
    SELECT * FROM (SELECT job_id, org, payload, attempts, run_at FROM jobs
                   WHERE queue=?1 AND state='ready' AND run_at<=?2 ORDER BY run_at LIMIT ?3)
    UNION ALL
    SELECT * FROM (SELECT job_id, org, payload, attempts, run_at FROM jobs
                   WHERE queue=?1 AND state='leased' AND run_at<=?2 ORDER BY run_at LIMIT ?3)
) ORDER BY run_at LIMIT ?3
"""
_ANY_DUE = (
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE queue=?1 AND state='ready' AND run_at<=?2)"
    " OR EXISTS (SELECT 1 FROM jobs WHERE queue=?1 AND state='leased' AND run_at<=?2)"
)


def _insert(
    conn: sqlite3.Connection, org: str, queue: str, job_id: str, payload: dict[str, Any], now: float, delay_s: float
) -> bool:
    row = conn.execute("SELECT state FROM jobs WHERE queue=? AND job_id=?", (queue, job_id)).fetchone()
    if row is not None and row[0] != "dead":
        return False
    conn.execute(
        "INSERT OR REPLACE INTO jobs (queue, job_id, org, payload, state, run_at, attempts, created_at)"
        " VALUES (?,?,?,?, 'ready', ?, 0, ?)",
        (queue, job_id, org, json.dumps(payload), now + delay_s, now),
    )
    return True


class SqliteWorkQueue:
    def __init__(self, db: SqliteDb) -> None:
        self._db = db
        self.signal = WorkSignal()  # this process's idle workers wake when a job is queued here
        db.executescript(_SCHEMA)

    def enqueue(self, org: str, queue: str, job_id: str, payload: dict[str, Any], *, delay_s: float = 0) -> bool:
        with self._db.write() as conn:
            queued = _insert(conn, org, queue, job_id, payload, time.time(), delay_s)
        if queued and delay_s <= 0:
            self.signal.notify()  # after the commit: a woken worker's claim sees the job
        return queued

    def enqueue_many(self, org: str, queue: str, jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        now = time.time()
        with self._db.write() as conn:
            queued = [_insert(conn, org, queue, job_id, payload, now, 0) for job_id, payload in jobs]
        if any(queued):
            self.signal.notify()
        return queued

    def claim(self, queue: str, *, lease_s: float, limit: int = 1) -> list[Job]:
        now = time.time()
        jobs: list[Job] = []
        # Most claims find nothing (a worker's pass asks every queue): a read answers that without taking
        # the write lock, which the other worker's commits and the accept path are waiting on.
        (due,) = self._db.conn.execute(_ANY_DUE, (queue, now)).fetchone()
        if not due:
            return jobs
        with self._db.write() as conn:
            rows = conn.execute(_DUE, (queue, now, limit)).fetchall()
            for job_id, org, payload, attempts in rows:
                token = uuid.uuid4().hex
                conn.execute(
                    "UPDATE jobs SET state='leased', lease_token=?, attempts=?, run_at=? WHERE queue=? AND job_id=?",
                    (token, attempts + 1, now + lease_s, queue, job_id),
                )
                jobs.append(Job(queue, job_id, org, json.loads(payload), attempts + 1, token))
        return jobs

    def complete(self, job: Job) -> None:
        with self._db.write() as conn:
            conn.execute(
                "DELETE FROM jobs WHERE queue=? AND job_id=? AND lease_token=?",
                (job.queue, job.job_id, job.lease_token),
            )

    def complete_many(self, jobs: Sequence[Job]) -> None:
        with self._db.write() as conn:
            conn.executemany(
                "DELETE FROM jobs WHERE queue=? AND job_id=? AND lease_token=?",
                [(job.queue, job.job_id, job.lease_token) for job in jobs],
            )

    def retry(self, job: Job, *, delay_s: float, error: str) -> None:
        with self._db.write() as conn:
            conn.execute(
                "UPDATE jobs SET state='ready', run_at=?, last_error=?, lease_token=NULL"
                " WHERE queue=? AND job_id=? AND lease_token=?",
                (time.time() + delay_s, error[:2000], job.queue, job.job_id, job.lease_token),
            )

    def fail(self, job: Job, *, error: str) -> None:
        with self._db.write() as conn:
            conn.execute(
                "UPDATE jobs SET state='dead', last_error=?, lease_token=NULL"
                " WHERE queue=? AND job_id=? AND lease_token=?",
                (error[:2000], job.queue, job.job_id, job.lease_token),
            )

    def release_leases(self) -> int:
        """At server start: every lease belongs to a process that is gone (one server per data dir)."""
        with self._db.write() as conn:
            cur = conn.execute(
                "UPDATE jobs SET state='ready', run_at=?, lease_token=NULL WHERE state='leased'", (time.time(),)
            )
            return cur.rowcount

    def pending(self, queue: str) -> int:
        row = self._db.conn.execute(
            "SELECT COUNT(*) FROM jobs WHERE queue=? AND state IN ('ready','leased')", (queue,)
        ).fetchone()
        return int(row[0])

    def depth_by_state(self) -> dict[tuple[str, str], int]:
        """Jobs per (queue, state) for the metrics: ready (due or delayed), leased, dead."""
        rows = self._db.conn.execute("SELECT queue, state, COUNT(*) FROM jobs GROUP BY queue, state").fetchall()
        return {(str(q), str(s)): int(n) for q, s, n in rows}

    def dead(self, queue: str) -> list[tuple[str, str]]:
        rows = self._db.conn.execute(
            "SELECT job_id, COALESCE(last_error,'') FROM jobs WHERE queue=? AND state='dead'", (queue,)
        ).fetchall()
        return [(str(a), str(b)) for a, b in rows]
