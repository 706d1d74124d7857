"""A queue with a batch handler: several due jobs per claim, each settled on its own outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
from ctxstore.pipeline import local_runner
from ctxstore.pipeline.local_runner import LocalRunner, QueueSpec
from ctxstore.pipeline.retry_policy import RetryPolicy, TransientError
from ctxstore.ports.work_queue import Job


def _queue(tmp_path: Path) -> SqliteWorkQueue:
    return SqliteWorkQueue(SqliteDb(tmp_path / "q.db"))


def _single(job: Job) -> None:
    raise AssertionError("a batch queue runs its batch handler")


def test_a_worker_claims_up_to_the_batch_and_settles_each_job(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    batches: list[list[str]] = []
    failures: list[str] = []

    def handle(jobs: Sequence[Job]) -> list[BaseException | None]:
        batches.append([j.job_id for j in jobs])
        out: list[BaseException | None] = []
        for j in jobs:
            if j.job_id == "j1" and j.attempts == 1:
                out.append(TransientError("index busy"))
            elif j.job_id == "j2":
                out.append(ValueError("corrupt"))
            else:
                out.append(None)
        return out

    spec = QueueSpec(
        "q",
        _single,
        RetryPolicy(max_attempts=3, interval_s=0, jitter=False),
        on_failure=lambda job, err: failures.append(job.job_id),
        batch_handler=handle,
        batch=4,
    )
    for i in range(6):
        q.enqueue("o", "q", f"j{i}", {})
    runner = LocalRunner(q, [spec], threads=1)
    assert runner.run_once() == 4
    assert batches == [["j0", "j1", "j2", "j3"]]
    # j0 and j3 done, j1 back for a retry, j2 given up (reported once, dead-lettered).
    assert failures == ["j2"] and [j for j, _ in q.dead("q")] == ["j2"]
    runner.drain()
    assert sorted(batches[1]) == ["j1", "j4", "j5"]
    assert q.pending("q") == 0 and failures == ["j2"]


def test_a_short_queue_is_shared_between_workers(tmp_path: Path) -> None:
    """Three due jobs and two workers: a worker takes two, not all three, so the other is not left idle."""
    q = _queue(tmp_path)
    sizes: list[int] = []

    def handle(jobs: Sequence[Job]) -> list[BaseException | None]:
        sizes.append(len(jobs))
        return [None] * len(jobs)

    for i in range(3):
        q.enqueue("o", "q", f"j{i}", {})
    runner = LocalRunner(q, [QueueSpec("q", _single, batch_handler=handle, batch=8)], threads=2)
    runner.run_once()
    runner.run_once()
    assert sizes == [2, 1]


def test_a_broken_batch_handler_fails_its_jobs_like_single_ones(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    failures: list[tuple[str, str]] = []

    def handle(jobs: Sequence[Job]) -> list[BaseException | None]:
        raise RuntimeError("handler bug")

    spec = QueueSpec(
        "q", _single, on_failure=lambda j, e: failures.append((j.job_id, e)), batch_handler=handle, batch=4
    )
    q.enqueue("o", "q", "a", {})
    q.enqueue("o", "q", "b", {})
    LocalRunner(q, [spec], threads=1).drain()
    assert sorted(failures) == [("a", "RuntimeError: handler bug"), ("b", "RuntimeError: handler bug")]


def test_claim_takes_ready_and_expired_jobs_oldest_first_and_skips_live_leases(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    q.enqueue("o", "q", "leased-live", {})
    [live] = q.claim("q", lease_s=300)
    q.enqueue("o", "q", "expired", {})
    [expired] = q.claim("q", lease_s=0.4)
    q.enqueue("o", "q", "ready-1", {})
    q.enqueue("o", "q", "ready-2", {}, delay_s=0.15)
    q.enqueue("o", "q", "later", {}, delay_s=60)
    time.sleep(0.6)
    got = q.claim("q", lease_s=300, limit=10)
    # The expired lease is due since its lease ran out (after ready-1 was queued), ready-2 since its delay.
    assert [j.job_id for j in got] == ["ready-1", "ready-2", "expired"]
    assert got[2].attempts == 2
    assert q.claim("q", lease_s=300, limit=10) == []
    assert live.job_id == "leased-live" and expired.job_id == "expired"


def test_a_background_queue_with_a_batch_handler_takes_its_batch_once_the_foreground_is_empty(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    order: list[list[str]] = []

    def handle(jobs: Sequence[Job]) -> list[BaseException | None]:
        order.append([j.job_id for j in jobs])
        return [TransientError("graph busy") if j.job_id == "g1" and j.attempts == 1 else None for j in jobs]

    fg = QueueSpec("index", lambda job: order.append([job.job_id]))
    bg = QueueSpec(
        "graph",
        _single,
        RetryPolicy(max_attempts=3, interval_s=0, jitter=False),
        background=True,
        max_running=1,
        batch_handler=handle,
        batch=3,
    )
    for i in range(5):
        q.enqueue("o", "graph", f"g{i}", {})
    q.enqueue("o", "index", "i0", {})
    runner = LocalRunner(q, [bg, fg], threads=2)
    assert runner.drain() == 7
    # The index job first; then the graph jobs three at a time, the one that asked for a retry again.
    assert order == [["i0"], ["g0", "g1", "g2"], ["g3", "g4", "g1"]]
    assert q.pending("graph") == 0


def test_a_background_batch_claimed_while_foreground_work_runs_is_short(tmp_path: Path) -> None:
    """While another worker indexes, a graph batch takes `batch_while_busy` jobs (it holds a worker the index may
    want back in a moment); once the foreground has been quiet for FOREGROUND_QUIET_S, the whole `batch`."""
    q = _queue(tmp_path)
    sizes: list[int] = []
    indexing = threading.Event()
    release = threading.Event()

    def index(job: Job) -> None:
        indexing.set()
        assert release.wait(10)

    def graph(jobs: Sequence[Job]) -> list[BaseException | None]:
        sizes.append(len(jobs))
        return [None] * len(jobs)

    fg = QueueSpec("index", index)
    bg = QueueSpec("graph", _single, background=True, max_running=1, batch_handler=graph, batch=8, batch_while_busy=2)
    for i in range(20):
        q.enqueue("o", "graph", f"g{i}", {})
    q.enqueue("o", "index", "i0", {})
    runner = LocalRunner(q, [fg, bg], threads=2)
    busy = threading.Thread(target=runner.run_once)
    busy.start()
    assert indexing.wait(10)
    assert runner.run_once() == 2  # the index job is running on the other worker
    release.set()
    busy.join(10)
    assert runner.run_once() == 2  # it ended a moment ago
    time.sleep(local_runner.FOREGROUND_QUIET_S + 0.1)
    assert runner.run_once() == 8
    assert sizes == [2, 2, 8] and q.pending("graph") == 8
