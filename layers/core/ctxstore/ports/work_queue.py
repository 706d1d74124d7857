"""A durable work queue: accepted work survives crashes and is handed out at least once.

Jobs are leased; a worker that dies loses its lease and the job is handed out
again. A job id is unique per queue, so enqueueing twice is a no-op (the
dedup key of a retried request).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Job:
    queue: str
    job_id: str
    org: str
    payload: dict[str, Any]
    attempts: int  # number of times this job has been claimed, this claim included
    lease_token: str


class WorkQueue(Protocol):
    def enqueue(self, org: str, queue: str, job_id: str, payload: dict[str, Any], *, delay_s: float = 0) -> bool:
        """True if queued; False if a job with this id is already queued or running."""
        ...

    def enqueue_many(self, org: str, queue: str, jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        """enqueue() for several (job id, payload) of one org and queue, in one write where the store allows."""
        ...

    def claim(self, queue: str, *, lease_s: float, limit: int = 1) -> list[Job]: ...

    def complete(self, job: Job) -> None: ...

    def complete_many(self, jobs: Sequence[Job]) -> None:
        """complete() for several jobs, in one write where the store allows."""
        ...

    def retry(self, job: Job, *, delay_s: float, error: str) -> None:
        """Release the job to run again after delay_s."""
        ...

    def fail(self, job: Job, *, error: str) -> None:
        """Give up: the job moves to the dead-letter set."""
        ...

    def pending(self, queue: str) -> int: ...


def enqueue_each(queue: WorkQueue, org: str, name: str, jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
    """enqueue_many for a store without a batched write: one enqueue per job, in order."""
    return [queue.enqueue(org, name, job_id, payload) for job_id, payload in jobs]


def complete_each(queue: WorkQueue, jobs: Sequence[Job]) -> None:
    """complete_many for a store without a batched write."""
    for job in jobs:
        queue.complete(job)


class WorkSignal:
    """Wakes idle workers of this process when a job is queued, instead of at their next poll.

    Workers still poll (delayed retries, expired leases and other processes' jobs are only found that
    way), so the poll can be slow and idle workers cost nothing, while new work starts at once.
    A generation number closes the gap between a worker's empty claim and its wait: a job queued
    in between has moved the generation, and the wait returns at once.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    @property
    def generation(self) -> int:
        return self._generation

    def notify(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> None:
        """Return once the generation has moved past `seen`, or after `timeout` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: self._generation != seen, timeout)
