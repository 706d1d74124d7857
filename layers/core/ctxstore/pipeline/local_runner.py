"""Runs queued jobs in background threads: claim, handle, complete or retry with backoff, dead-letter."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.pipeline.retry_policy import RetryPolicy, TransientError
from ctxstore.ports.work_queue import Job, WorkQueue, WorkSignal

log = logging.getLogger("ctxstore.runner")

Handler = Callable[[Job], None]
# Several jobs of one queue at once; per job None (done) or the exception that job ended with.
BatchHandler = Callable[[Sequence[Job]], list[BaseException | None]]
FailureHook = Callable[[Job, str], None]
Outcome = Literal["done", "retry", "failed"]
MAX_STORAGE_BACKOFF_S = 5.0
RELEASED = "released at shutdown: its worker did not finish it in time"
FOREGROUND_QUIET_S = 1.0


@dataclass(frozen=True)
class QueueSpec:
    name: str
    handler: Handler
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    lease_s: float = 300.0
    on_failure: FailureHook | None = None  # called once a job is given up on
    # A background queue is claimed only in a pass that found nothing else to run, and by at most
    # `max_running` threads at once (0: no bound), so the foreground queues always have a thread.
    background: bool = False
    max_running: int = 0
    # With a batch handler a worker claims up to `batch` due jobs in one go (fewer when the queue is short,
    # so the other workers get their share) and the handler shares writes between them.
    batch_handler: BatchHandler | None = None
    batch: int = 1
    # A background batch claimed while foreground work runs, or within FOREGROUND_QUIET_S of it, takes at most this
    # many jobs (0: `batch`): it holds a worker the foreground queues may need again in a moment.
    batch_while_busy: int = 0


class LocalRunner:
    def __init__(
        self,
        queue: WorkQueue,
        specs: list[QueueSpec],
        *,
        threads: int = 2,
        idle_sleep_s: float = 1.0,
        wake: WorkSignal | None = None,
    ) -> None:
        """`idle_sleep_s` is the poll of an idle worker; with `wake` (the queue's in-process signal) a job
        queued in this process starts at once, so the poll only finds retries, expired leases and others'."""
        self._queue = queue
        self._wake = wake
        self._specs = specs
        self._threads = max(1, threads)
        self._idle = idle_sleep_s
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        # Outcomes that could not be written (the queue's own store was unavailable, e.g. a full disk): kept
        # here and written first on the next pass, so a job is retried when space returns, not after its lease.
        self._unrecorded: list[Callable[[], None]] = []
        self._unrecorded_lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._running_lock = threading.Lock()
        self._foreground_busy = 0  # workers in foreground work now (under _running_lock)
        self._foreground_at = float("-inf")  # when foreground work last ended (monotonic)
        # Jobs claimed and not yet settled, by worker thread: what a stop releases if their worker is still busy.
        self._claimed: dict[int, list[Job]] = {}
        self._released: set[tuple[str, str, str]] = set()
        self._claimed_lock = threading.Lock()

    def start(self) -> None:
        for i in range(self._threads):
            t = threading.Thread(target=self._loop, name=f"ctxstore-worker-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def request_stop(self) -> None:
        """Claim nothing more; the workers finish the jobs they hold (the first step of a drain)."""
        self._stop.set()
        if self._wake is not None:
            self._wake.notify()

    def stop(self, timeout: float = 10.0) -> int:
        """Drain: wait up to `timeout` in all for the workers to finish their jobs, then hand back to the queue
        (ready at once) the jobs of those still busy, so the next start runs them without waiting out a lease.
        Returns how many were released. A released job's late outcome is dropped: it runs again."""
        self.request_stop()
        deadline = time.monotonic() + timeout
        for t in self._workers:
            t.join(max(0.0, deadline - time.monotonic()))
        busy = [t for t in self._workers if t.is_alive()]
        self._workers.clear()
        with self._claimed_lock:
            held = [job for t in busy if t.ident is not None for job in self._claimed.pop(t.ident, [])]
            self._released.update(_key(job) for job in held)
        for job in held:
            self._queue.retry(job, delay_s=0, error=RELEASED)
        if held:
            log.warning("released %d unfinished job(s) at shutdown: the next start runs them", len(held))
        return len(held)

    def run_once(self) -> int:
        """Claim and run at most one job per queue; returns how many ran (tests drive this directly)."""
        self._flush_unrecorded()
        ran = self._run_foreground()
        for spec in self._specs:
            if spec.background and not ran and not (self._stop.is_set() and self._workers):
                ran += self._run_background(spec)
        return ran

    def _run_foreground(self) -> int:
        ran = 0
        for spec in self._specs:
            if spec.background:
                continue
            if spec.batch_handler is not None and spec.batch > 1:
                ran += self._run_batch(spec)
                continue
            if self._stop.is_set() and self._workers:
                break  # draining: claim nothing more
            for job in self._claim(spec, 1):
                with self._foreground():
                    self._run(spec, job)
                ran += 1
        return ran

    @contextlib.contextmanager
    def _foreground(self) -> Iterator[None]:
        """Marks a worker busy with foreground jobs (what sizes a background batch claimed meanwhile)."""
        with self._running_lock:
            self._foreground_busy += 1
        try:
            yield
        finally:
            with self._running_lock:
                self._foreground_busy -= 1
                self._foreground_at = time.monotonic()

    def _claim(self, spec: QueueSpec, limit: int) -> list[Job]:
        jobs = self._queue.claim(spec.name, lease_s=spec.lease_s, limit=limit)
        if jobs:
            with self._claimed_lock:
                self._claimed.setdefault(threading.get_ident(), []).extend(jobs)
        return jobs

    def _unclaim(self, job: Job) -> bool:
        """Forget a settled job; False when a stop released it meanwhile (its outcome must not be written)."""
        with self._claimed_lock:
            held = self._claimed.get(threading.get_ident(), [])
            if job in held:
                held.remove(job)
            if _key(job) in self._released:
                self._released.discard(_key(job))
                return False
            return True

    def _run_background(self, spec: QueueSpec) -> int:
        with self._running_lock:
            running = self._running.get(spec.name, 0)
            if spec.max_running and running >= spec.max_running:
                return 0
            self._running[spec.name] = running + 1
            busy = self._foreground_busy > 0 or time.monotonic() - self._foreground_at < FOREGROUND_QUIET_S
        try:
            if spec.batch_handler is not None and spec.batch > 1:
                # No even split here: the background lane has its own threads, and its batch shares the
                # handler's fixed costs (an extraction call, the graph writes) between many jobs.
                limit = min(spec.batch, spec.batch_while_busy) if busy and spec.batch_while_busy else spec.batch
                jobs = self._claim(spec, limit)
                if jobs:
                    self._settle_batch(spec, jobs)
                return len(jobs)
            jobs = self._claim(spec, 1)
            for job in jobs:
                self._run(spec, job)
            return len(jobs)
        finally:
            with self._running_lock:
                self._running[spec.name] -= 1

    @property
    def threads(self) -> int:
        return self._threads

    def drain(self, max_jobs: int = 10_000) -> int:
        total = 0
        while total < max_jobs:
            n = self.run_once()
            if n == 0:
                return total
            total += n
        return total

    def _loop(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            seen = self._wake.generation if self._wake is not None else 0
            try:
                ran = self.run_once()
                backoff = 0.0
            except StoreUnavailable as exc:
                # Storage trouble (a full disk, a lock held too long): one line, then wait longer each time
                # instead of a traceback every idle tick.
                backoff = min(MAX_STORAGE_BACKOFF_S, max(self._idle, backoff * 2 or 0.2))
                log.warning("worker paused %.1fs: storage unavailable: %s", backoff, exc)
                self._stop.wait(backoff)
                continue
            except Exception:  # the loop must outlive any one bad job
                log.exception("worker loop error")
                ran = 0
            if ran == 0:
                if self._wake is not None:
                    self._wake.wait(seen, self._idle)
                else:
                    self._stop.wait(self._idle)

    def run_job(self, spec: QueueSpec, job: Job) -> Outcome:
        """Run one job already claimed (or handed over by a trigger, as SQS does): its outcome."""
        return self._run(spec, job)

    def _run(self, spec: QueueSpec, job: Job) -> Outcome:
        try:
            spec.handler(job)
        except Exception as exc:
            return self._settle(spec, job, exc)
        return self._settle(spec, job, None)

    def _run_batch(self, spec: QueueSpec) -> int:
        assert spec.batch_handler is not None
        share = -(-self._queue.pending(spec.name) // self._threads)  # ceil: an even split of what waits
        if self._stop.is_set() and self._workers:
            return 0  # draining: claim nothing more
        jobs = self._claim(spec, max(1, min(spec.batch, share)))
        if not jobs:
            return 0
        with self._foreground():
            self._settle_batch(spec, jobs)
        return len(jobs)

    def _settle_batch(self, spec: QueueSpec, jobs: list[Job]) -> None:
        """Run a batch handler over claimed jobs and record each job's outcome."""
        assert spec.batch_handler is not None
        try:
            errors = spec.batch_handler(jobs)
        except Exception as exc:  # the handler itself broke: every job of the batch ends as if it had
            errors = [exc] * len(jobs)
        unrecorded: StoreUnavailable | None = None
        done: list[Job] = []
        for job, error in zip(jobs, errors, strict=True):
            if error is None:
                if self._unclaim(job):  # else released at shutdown: it runs again from the queue
                    done.append(job)
                continue
            try:
                self._settle(spec, job, error)
            except StoreUnavailable as exc:  # kept for the next pass; settle the rest first
                unrecorded = exc
        if done:  # one write for the batch's finished jobs
            try:
                self._record(lambda: self._queue.complete_many(done))
            except StoreUnavailable as exc:
                unrecorded = exc
        if unrecorded is not None:
            raise unrecorded

    def _settle(self, spec: QueueSpec, job: Job, exc: BaseException | None) -> Outcome:
        """Record a job's outcome: done, a retry after backoff (transient), or given up."""
        if not self._unclaim(job):
            return "retry"  # released at shutdown: it runs again from the queue
        if exc is None:
            self._record(lambda: self._queue.complete(job))
            return "done"
        if isinstance(exc, (TransientError, StoreUnavailable)):
            code = exc.code if isinstance(exc, TransientError) else "E6001"
            return self._retry_or_fail(spec, job, f"{code}: {exc}")
        log.error("job %s/%s failed", spec.name, job.job_id, exc_info=exc)
        error = f"{type(exc).__name__}: {exc}"
        self._record(lambda: self._give_up(spec, job, error))
        return "failed"

    def _retry_or_fail(self, spec: QueueSpec, job: Job, error: str) -> Outcome:
        if job.attempts >= spec.policy.max_attempts:
            self._record(lambda: self._give_up(spec, job, error))
            return "failed"
        delay = spec.policy.delay(job.attempts)
        self._record(lambda: self._queue.retry(job, delay_s=delay, error=error))
        return "retry"

    def _give_up(self, spec: QueueSpec, job: Job, error: str) -> None:
        if spec.on_failure is not None:
            spec.on_failure(job, error)
        self._queue.fail(job, error=error)

    def _record(self, write: Callable[[], None]) -> None:
        """Write a job's outcome now, or keep it for the next pass when storage is unavailable."""
        try:
            write()
        except StoreUnavailable:
            with self._unrecorded_lock:
                self._unrecorded.append(write)
            raise

    def _flush_unrecorded(self) -> None:
        with self._unrecorded_lock:
            pending, self._unrecorded = self._unrecorded, []
        for i, write in enumerate(pending):
            try:
                write()
            except StoreUnavailable:
                with self._unrecorded_lock:
                    self._unrecorded[:0] = pending[i:]
                raise


def _key(job: Job) -> tuple[str, str, str]:
    return (job.queue, job.job_id, job.lease_token)
