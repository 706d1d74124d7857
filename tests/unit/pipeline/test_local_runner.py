from __future__ import annotations

from pathlib import Path

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
from ctxstore.pipeline.local_runner import LocalRunner, QueueSpec
from ctxstore.pipeline.retry_policy import RetryPolicy, TransientError
from ctxstore.ports.work_queue import Job


def _queue(tmp_path: Path) -> SqliteWorkQueue:
    return SqliteWorkQueue(SqliteDb(tmp_path / "q.db"))


def test_transient_errors_retry_then_succeed(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    calls: list[int] = []

    def flaky(job: Job) -> None:
        calls.append(job.attempts)
        if job.attempts < 3:
            raise TransientError("storage hiccup")

    runner = LocalRunner(q, [QueueSpec("q", flaky, RetryPolicy(max_attempts=5, interval_s=0, jitter=False))])
    q.enqueue("o", "q", "j", {})
    assert runner.drain() == 3
    assert calls == [1, 2, 3] and q.pending("q") == 0 and q.dead("q") == []


def test_exhausted_retries_dead_letter_and_report(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    failures: list[tuple[str, str]] = []

    def always(job: Job) -> None:
        raise TransientError("still down")

    spec = QueueSpec(
        "q",
        always,
        RetryPolicy(max_attempts=2, interval_s=0, jitter=False),
        on_failure=lambda job, err: failures.append((job.job_id, err)),
    )
    runner = LocalRunner(q, [spec])
    q.enqueue("o", "q", "j", {})
    runner.drain()
    assert failures == [("j", "E6001: still down")]
    assert q.dead("q") == [("j", "E6001: still down")]


def test_permanent_error_fails_at_once(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    seen: list[int] = []

    def broken(job: Job) -> None:
        seen.append(job.attempts)
        raise ValueError("corrupt input")

    runner = LocalRunner(q, [QueueSpec("q", broken, on_failure=lambda j, e: None)])
    q.enqueue("o", "q", "j", {})
    runner.drain()
    assert seen == [1] and q.dead("q")[0][1] == "ValueError: corrupt input"


def test_threads_process_all_jobs_once(tmp_path: Path) -> None:
    import threading
    import time

    q = _queue(tmp_path)
    done: list[str] = []
    lock = threading.Lock()

    def handle(job: Job) -> None:
        with lock:
            done.append(job.job_id)

    for i in range(50):
        q.enqueue("o", "q", f"j{i}", {})
    runner = LocalRunner(q, [QueueSpec("q", handle)], threads=2, idle_sleep_s=0.01)
    runner.start()
    deadline = time.time() + 10
    while q.pending("q") and time.time() < deadline:
        time.sleep(0.02)
    runner.stop()
    assert sorted(done) == sorted(f"j{i}" for i in range(50))


def test_backoff_grows_and_is_capped() -> None:
    p = RetryPolicy(interval_s=1, backoff_rate=2, max_delay_s=5, jitter=False)
    assert [p.delay(a) for a in (1, 2, 3, 4, 5)] == [1, 2, 4, 5, 5]
    j = RetryPolicy(interval_s=1, backoff_rate=2, max_delay_s=5, jitter=True)
    assert all(0 <= j.delay(3) <= 4 for _ in range(50))


def test_a_background_queue_runs_only_when_the_foreground_is_empty(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    order: list[str] = []
    fg = QueueSpec("index", lambda job: order.append(job.job_id))
    bg = QueueSpec("graph", lambda job: order.append(job.job_id), background=True, max_running=1)
    runner = LocalRunner(q, [bg, fg])  # listed first, still served last
    for i in range(3):
        q.enqueue("o", "graph", f"g{i}", {})
        q.enqueue("o", "index", f"i{i}", {})
    assert runner.drain() == 6
    assert order == ["i0", "i1", "i2", "g0", "g1", "g2"]


def test_a_background_queue_never_takes_more_threads_than_allowed(tmp_path: Path) -> None:
    import threading
    import time

    q = _queue(tmp_path)
    running, peak, lock = [0], [0], threading.Lock()

    def slow(job: Job) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1

    runner = LocalRunner(q, [QueueSpec("graph", slow, background=True, max_running=1)], threads=3, idle_sleep_s=0.005)
    for i in range(6):
        q.enqueue("o", "graph", f"g{i}", {})
    runner.start()
    try:
        deadline = time.time() + 10
        while q.pending("graph") and time.time() < deadline:
            time.sleep(0.02)
    finally:
        runner.stop()
    assert q.pending("graph") == 0 and peak[0] == 1


def test_a_queued_job_wakes_an_idle_worker_before_its_poll(tmp_path: Path) -> None:
    """With the queue's signal an idle worker starts new work at once; without it, at its next poll."""
    import threading
    import time

    for wake in (True, False):
        q = _queue(tmp_path / str(wake))
        started = threading.Event()
        runner = LocalRunner(
            q,
            [QueueSpec("q", lambda job, started=started: started.set())],
            threads=1,
            idle_sleep_s=5.0,
            wake=q.signal if wake else None,
        )
        runner.start()
        try:
            time.sleep(0.3)  # the worker found nothing and is idle
            t0 = time.monotonic()
            q.enqueue("o", "q", "j", {})
            ran = started.wait(1.0)
            assert ran is wake, f"wake={wake}: ran={ran} after {time.monotonic() - t0:.2f}s"
        finally:
            runner.stop()


def test_stop_wakes_an_idle_worker(tmp_path: Path) -> None:
    import time

    q = _queue(tmp_path)
    runner = LocalRunner(q, [QueueSpec("q", lambda job: None)], threads=2, idle_sleep_s=30.0, wake=q.signal)
    runner.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    runner.stop(timeout=5.0)
    assert time.monotonic() - t0 < 2.0
