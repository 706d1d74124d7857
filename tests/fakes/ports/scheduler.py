"""An in-memory Scheduler: one schedule per (org, id); `due` hands each due schedule out once and moves
it to now + its interval, as the SQLite poller does."""

from __future__ import annotations

import json
import threading
from typing import Any

from ctxstore.ports.scheduler import Schedule


class InMemoryScheduler:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str], tuple[int, float, str]] = {}  # every_s, next_at, payload JSON

    def upsert(self, org: str, schedule_id: str, *, every_s: int, next_at: float, payload: dict[str, Any]) -> None:
        body = json.dumps(payload)
        with self._lock:
            self._rows[(org, schedule_id)] = (int(every_s), float(next_at), body)

    def cancel(self, org: str, schedule_id: str) -> bool:
        with self._lock:
            return self._rows.pop((org, schedule_id), None) is not None

    def due(self, now: float, *, limit: int = 100) -> list[Schedule]:
        with self._lock:
            ready = sorted((row[1], key) for key, row in self._rows.items() if row[1] <= now)[:limit]
            out: list[Schedule] = []
            for next_at, (org, schedule_id) in ready:
                every_s, _, body = self._rows[(org, schedule_id)]
                self._rows[(org, schedule_id)] = (every_s, now + every_s, body)
                out.append(Schedule(schedule_id, org, every_s, next_at, json.loads(body)))
            return out

    def next_at(self, org: str, schedule_id: str) -> float | None:
        with self._lock:
            row = self._rows.get((org, schedule_id))
        return row[1] if row else None

    def count(self) -> int:
        with self._lock:
            return len(self._rows)
