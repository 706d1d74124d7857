"""Scheduler: recurring triggers (connector syncs). Local: a table polled by the server; AWS: EventBridge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Schedule:
    schedule_id: str
    org: str
    every_s: int
    next_at: float
    payload: dict[str, Any]


class Scheduler(Protocol):
    def upsert(self, org: str, schedule_id: str, *, every_s: int, next_at: float, payload: dict[str, Any]) -> None: ...

    def cancel(self, org: str, schedule_id: str) -> bool: ...

    def due(self, now: float, *, limit: int = 100) -> list[Schedule]:
        """Schedules whose time has come; each is advanced by its interval as it is returned."""
        ...
