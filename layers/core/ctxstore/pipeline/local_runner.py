"""Runs queued jobs in background threads: claim, handle, complete or retry with backoff, dead-letter."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ctxstore.pipeline.retry_policy import RetryPolicy, TransientError
from ctxstore.ports.work_queue import Job, WorkQueue

log = logging.getLogger("ctxstore.runner")

Handler = Callable[[Job], None]
FailureHook = Callable[[Job, str], None]
Outcome = Literal["done", "retry", "failed"]


@dataclass(frozen=True)
class QueueSpec:
    name: str
    handler: Handler
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    lease_s: float = 300.0
    on_failure: FailureHook | None = None  # called once a job is given up on


class LocalRunner:
    def __init__(
        self, queue: WorkQueue, specs: list[QueueSpec], *, threads: int = 2, idle_sleep_s: float = 0.05
    ) -> None:
        self._queue = queue
        self._specs = specs
        self._threads = max(1, threads)
        self._idle = idle_sleep_s
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []

    def start(self) -> None:
        for i in range(self._threads):
            t = threading.Thread(target=self._loop, name=f"ctxstore-worker-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        for t in self._workers:
            t.join(timeout)
        self._workers.clear()

    def run_once(self) -> int:
        """Claim and run at most one job per queue; returns how many ran (tests drive this directly)."""
        ran = 0
        for spec in self._specs:
            for job in self._queue.claim(spec.name, lease_s=spec.lease_s, limit=1):
                self._run(spec, job)
                ran += 1
        return ran

    def drain(self, max_jobs: int = 10_000) -> int:
        total = 0
        while total < max_jobs:
            n = self.run_once()
            if n == 0:
                return total
            total += n
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_once()
            except Exception:  # the loop must outlive any one bad job or storage hiccup
                log.exception("worker loop error")
                ran = 0
            if ran == 0:
                self._stop.wait(self._idle)

    def run_job(self, spec: QueueSpec, job: Job) -> Outcome:
        """Run one job already claimed (or handed over by a trigger, as SQS does): its outcome."""
        return self._run(spec, job)

    def _run(self, spec: QueueSpec, job: Job) -> Outcome:
        try:
            spec.handler(job)
        except TransientError as exc:
            return self._retry_or_fail(spec, job, f"{exc.code}: {exc}")
        except Exception as exc:
            log.exception("job %s/%s failed", spec.name, job.job_id)
            self._give_up(spec, job, f"{type(exc).__name__}: {exc}")
            return "failed"
        self._queue.complete(job)
        return "done"

    def _retry_or_fail(self, spec: QueueSpec, job: Job, error: str) -> Outcome:
        if job.attempts >= spec.policy.max_attempts:
            self._give_up(spec, job, error)
            return "failed"
        self._queue.retry(job, delay_s=spec.policy.delay(job.attempts), error=error)
        return "retry"

    def _give_up(self, spec: QueueSpec, job: Job, error: str) -> None:
        if spec.on_failure is not None:
            spec.on_failure(job, error)
        self._queue.fail(job, error=error)
