"""An in-memory WorkQueue: leased jobs, one job per (queue, job id) while queued or running, delayed
retries, a dead-letter set, FIFO by due time. Time comes from a Clock, so a test can expire a lease by
moving a FakeClock instead of sleeping."""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxstore.ports.clock import Clock
from ctxstore.ports.work_queue import Job, WorkSignal, complete_each, enqueue_each
from tests.fakes.ports.clock import RealClock

_State = Literal["ready", "leased", "dead"]


@dataclass
class _Entry:
    org: str
    payload: str  # JSON text: the job a worker gets is not the dict the producer still holds
    state: _State
    run_at: float  # ready: due time; leased: lease end
    seq: int  # enqueue order, for jobs due at the same instant
    attempts: int = 0
    lease_token: str | None = None
    last_error: str | None = None


class InMemoryWorkQueue:
    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or RealClock()
        self._lock = threading.Lock()
        self._queues: dict[str, dict[str, _Entry]] = {}
        self._seq = itertools.count()
        self.signal = WorkSignal()  # as the SQLite queue: idle workers of this process wake on enqueue

    def enqueue(self, org: str, queue: str, job_id: str, payload: dict[str, Any], *, delay_s: float = 0) -> bool:
        body = json.dumps(payload)
        with self._lock:
            jobs = self._queues.setdefault(queue, {})
            current = jobs.get(job_id)
            if current is not None and current.state != "dead":
                return False
            jobs[job_id] = _Entry(org, body, "ready", self._clock.now() + delay_s, next(self._seq))
        if delay_s <= 0:
            self.signal.notify()
        return True

    def enqueue_many(self, org: str, queue: str, jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        return enqueue_each(self, org, queue, jobs)

    def claim(self, queue: str, *, lease_s: float, limit: int = 1) -> list[Job]:
        now = self._clock.now()
        with self._lock:
            jobs = self._queues.get(queue, {})
            # ready jobs that are due, and leased ones whose lease ran out (their worker died)
            due = sorted(
                ((job_id, e) for job_id, e in jobs.items() if e.state != "dead" and e.run_at <= now),
                key=lambda pair: (pair[1].run_at, pair[1].seq),
            )[:limit]
            out: list[Job] = []
            for job_id, entry in due:
                entry.state, entry.run_at = "leased", now + lease_s
                entry.attempts += 1
                entry.lease_token = uuid.uuid4().hex
                out.append(Job(queue, job_id, entry.org, json.loads(entry.payload), entry.attempts, entry.lease_token))
            return out

    def _held(self, job: Job) -> _Entry | None:
        """The job's entry if `job` still holds its lease (a stale worker's ack or retry changes nothing)."""
        entry = self._queues.get(job.queue, {}).get(job.job_id)
        return entry if entry is not None and entry.lease_token == job.lease_token else None

    def complete(self, job: Job) -> None:
        with self._lock:
            if self._held(job) is not None:
                del self._queues[job.queue][job.job_id]

    def complete_many(self, jobs: Sequence[Job]) -> None:
        complete_each(self, jobs)

    def retry(self, job: Job, *, delay_s: float, error: str) -> None:
        with self._lock:
            entry = self._held(job)
            if entry is not None:
                entry.state, entry.run_at, entry.lease_token = "ready", self._clock.now() + delay_s, None
                entry.last_error = error[:2000]

    def fail(self, job: Job, *, error: str) -> None:
        with self._lock:
            entry = self._held(job)
            if entry is not None:
                entry.state, entry.lease_token, entry.last_error = "dead", None, error[:2000]

    def pending(self, queue: str) -> int:
        with self._lock:
            return sum(1 for e in self._queues.get(queue, {}).values() if e.state != "dead")

    def dead(self, queue: str) -> list[tuple[str, str]]:
        """(job id, last error) of the dead-lettered jobs (as SqliteWorkQueue.dead)."""
        with self._lock:
            return [(j, e.last_error or "") for j, e in self._queues.get(queue, {}).items() if e.state == "dead"]
