"""Clocks for tests: a fake one that moves only when told, and the real one's semantics as its default."""

from __future__ import annotations

import threading
import time


class FakeClock:
    """A Clock whose time moves only by `advance` (or `set`): tests of leases, schedules and expiry run
    without sleeping. `monotonic` moves with `now` and never goes backwards, even when `set` does."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._lock = threading.Lock()
        self._now = float(start)
        self._mono = 0.0

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock does not advance backwards; use set() to move wall time back")
        with self._lock:
            self._now += seconds
            self._mono += seconds
            return self._now

    def set(self, now: float) -> None:
        """Move wall time (as an NTP step would); monotonic time is untouched."""
        with self._lock:
            self._now = float(now)


class RealClock:
    """The system's time, for fakes that run under contract suites which sleep for real."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()
