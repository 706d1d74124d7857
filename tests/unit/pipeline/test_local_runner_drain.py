"""A runner's drain (SIGTERM in `serve`): finish the held jobs, claim no more, release what is still running."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
from ctxstore.pipeline.local_runner import RELEASED, LocalRunner, QueueSpec
from ctxstore.ports.work_queue import Job


def _queue(tmp_path: Path) -> SqliteWorkQueue:
    return SqliteWorkQueue(SqliteDb(tmp_path / "q.db"))


def _states(tmp_path: Path) -> dict[str, tuple[str, str | None]]:
    with sqlite3.connect(tmp_path / "q.db") as db:
        return {r[0]: (r[1], r[2]) for r in db.execute("SELECT job_id, state, last_error FROM jobs")}


def test_a_stop_lets_the_held_job_finish_and_claims_nothing_more(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def slow(job: Job) -> None:
        started.set()
        release.wait(5)
        ran.append(job.job_id)

    runner = LocalRunner(q, [QueueSpec("q", slow)], threads=1, idle_sleep_s=0.01)
    q.enqueue("o", "q", "first", {})
    runner.start()
    assert started.wait(5)
    q.enqueue("o", "q", "second", {})
    runner.request_stop()
    threading.Timer(0.3, release.set).start()
    assert runner.stop(timeout=5) == 0
    assert ran == ["first"]  # finished; the second stays queued for the next start
    assert _states(tmp_path) == {"second": ("ready", None)}


def test_a_job_still_running_at_the_deadline_is_released_ready_at_once(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    started, release = threading.Event(), threading.Event()
    failures: list[str] = []

    def stuck(job: Job) -> None:
        started.set()
        release.wait(10)
        raise RuntimeError("its stores closed under it")

    spec = QueueSpec("q", stuck, lease_s=600, on_failure=lambda job, err: failures.append(err))
    runner = LocalRunner(q, [spec], threads=1, idle_sleep_s=0.01)
    q.enqueue("o", "q", "long", {})
    runner.start()
    assert started.wait(5)
    t0 = time.monotonic()
    assert runner.stop(timeout=0.3) == 1
    assert time.monotonic() - t0 < 2
    assert _states(tmp_path) == {"long": ("ready", RELEASED)}
    # Ready now, not after its 600 s lease: a claim (the next start's workers) gets it at once.
    [again] = q.claim("q", lease_s=60)
    assert again.job_id == "long"
    # The released worker's late failure is not written: the job is neither dead nor its item failed.
    release.set()
    time.sleep(0.3)
    assert failures == []
    assert _states(tmp_path) == {"long": ("leased", RELEASED)}
    q.complete(again)
    assert _states(tmp_path) == {}
