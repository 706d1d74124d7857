"""Clock: the one source of time, so tests can move it."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...

    def monotonic(self) -> float: ...
