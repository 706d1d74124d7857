"""Admission control: bounded work in flight per request class, a bounded wait, and a fast refusal.

Under overload the server stays useful by doing less at once: each class (queries, ingests, the rest)
runs at most `limit` requests at a time; up to `queue` more wait at most `wait_s` for a slot; anything
beyond is answered at once with 503 SERVICE_UNAVAILABLE and Retry-After. Without it, 250 concurrent
clients all ran on the thread pool together and every one of them got slow (p99 27 s).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

HEALTH_PATHS = ("/health", "/ready", "/metrics")


@dataclass(frozen=True)
class ClassLimits:
    limit: int  # requests running at once
    queue: int  # requests waiting for a slot
    wait_s: float  # longest wait before a refusal


@dataclass(frozen=True)
class AdmissionLimits:
    query: ClassLimits | None
    ingest: ClassLimits | None
    other: ClassLimits | None

    @staticmethod
    def of(queries: int, ingests: int, other: int, wait_s: float) -> AdmissionLimits:
        """Each class waits in a queue of 8 requests per slot; ingests and the rest may wait 2.5x longer."""

        def limits(n: int, wait: float) -> ClassLimits | None:
            return ClassLimits(limit=n, queue=8 * n, wait_s=wait) if n > 0 else None

        return AdmissionLimits(limits(queries, wait_s), limits(ingests, 2.5 * wait_s), limits(other, 2.5 * wait_s))


class Refused(Exception):
    def __init__(self, klass: str, reason: str, retry_after_s: int) -> None:
        super().__init__(f"the server is at capacity for {klass} requests ({reason}); retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Gate:
    def __init__(self, name: str, limits: ClassLimits) -> None:
        self.name = name
        self.limits = limits
        self._slots = asyncio.Semaphore(limits.limit)
        self._waiting = 0
        self.refused = 0

    async def enter(self) -> None:
        if self._slots.locked():  # no free slot: wait in a bounded queue, for a bounded time
            if self._waiting >= self.limits.queue:
                self.refused += 1
                raise Refused(self.name, "queue full", 1)
            self._waiting += 1
            try:
                await asyncio.wait_for(self._slots.acquire(), timeout=self.limits.wait_s)
            except TimeoutError:
                self.refused += 1
                raise Refused(self.name, f"no slot within {self.limits.wait_s:g} s", 2) from None
            finally:
                self._waiting -= 1
        else:
            await self._slots.acquire()

    def leave(self) -> None:
        self._slots.release()


class Admission:
    """One gate per class and event loop (asyncio primitives belong to the loop that first waits on them;
    the server has one loop, test clients may start several)."""

    def __init__(self, limits: AdmissionLimits) -> None:
        self._limits = limits
        self._gates: dict[tuple[str, int], Gate] = {}

    @staticmethod
    def classify(method: str, path: str) -> str | None:
        if path in HEALTH_PATHS:
            return None
        if (method == "POST" and path == "/query") or (method == "GET" and path.endswith("subgraph")):
            return "query"
        if (method == "POST" and path in ("/context/ingest", "/context/uploads")) or path.startswith("/blobs/"):
            return "ingest"
        if method == "POST" and path.startswith("/console/") and path.endswith("/upload"):
            return "ingest"  # the console's one-file upload
        if method == "POST" and path.startswith("/console/") and path.endswith("/playground"):
            return "query"  # the console's query playground
        return "other"

    def gate(self, klass: str) -> Gate | None:
        key = (klass, id(asyncio.get_running_loop()))
        gate = self._gates.get(key)
        if gate is None:
            limits: ClassLimits | None = getattr(self._limits, klass)
            if limits is None:
                return None
            gate = Gate(klass, limits)
            self._gates[key] = gate
        return gate
