"""When connectors sync: persisted `next_sync_at` mirrored into the Scheduler port, runs on the work queue.

One queue (`connectors`) carries sync chunks; the job id is the connector id, so a connector is never
queued or running twice (the queue refuses a second job with the same id while one is ready or leased).
Locally `ctxstore serve` polls the SQLite scheduler every tick and enqueues what is due; on AWS an
EventBridge Scheduler schedule per connector invokes the connector_sync function, which enqueues the
same job and drains the queue. A finished chunk re-anchors the schedule at the connector's new
`next_sync_at` (soon when a chunk continues, `interval` after the cycle began when it is caught up).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from ctxstore.ports.clock import Clock
from ctxstore.ports.scheduler import Scheduler
from ctxstore.ports.work_queue import WorkQueue

log = logging.getLogger("ctxstore.connectors")
SYNC_QUEUE = "connectors"
BUSY_RETRY_S = 5.0  # a schedule that fired while its connector was still syncing fires again this soon
RELEASE_GRACE_S = 2.0  # a finished chunk marks its connector idle just before the queue releases its job id


def workflow_id(connector_id: str) -> str:
    return f"connector-sync-{connector_id}"


class SyncScheduling:
    def __init__(self, queue: WorkQueue, scheduler: Scheduler | None, clock: Clock) -> None:
        self._queue = queue
        self._scheduler = scheduler
        self._clock = clock

    def enqueue(self, org: str, connector_id: str, trigger: str) -> str | None:
        """Queue a sync chunk now; its run id, or None when one is already queued or running."""
        run_id = uuid.uuid4().hex
        payload = {"connector_id": connector_id, "run_id": run_id, "trigger": trigger}
        return run_id if self._queue.enqueue(org, SYNC_QUEUE, connector_id, payload) else None

    def enqueue_once_released(self, org: str, connector_id: str, trigger: str) -> str | None:
        """Queue a sync of a connector whose record says idle: the chunk that wrote `idle` may still hold
        its job id for a moment (its worker acknowledges the job after the write), so look again
        briefly before answering that a sync is queued."""
        deadline = self._clock.monotonic() + RELEASE_GRACE_S
        while True:
            run_id = self.enqueue(org, connector_id, trigger)
            if run_id is not None or self._clock.monotonic() >= deadline:
                return run_id
            time.sleep(0.05)

    def reschedule(self, org: str, connector: dict[str, Any]) -> None:
        """Mirror the connector's next_sync_at into the scheduler (cancelled when there is none)."""
        if self._scheduler is None:
            return
        connector_id = str(connector["connector_id"])
        next_at = connector.get("next_sync_at")
        if next_at is None:
            self._scheduler.cancel(org, connector_id)
            return
        self._scheduler.upsert(
            org,
            connector_id,
            every_s=int(connector["sync_interval_seconds"]),
            next_at=float(next_at),
            payload={"connector_id": connector_id},
        )

    def cancel(self, org: str, connector_id: str) -> None:
        if self._scheduler is not None:
            self._scheduler.cancel(org, connector_id)

    def on_schedule(self, org: str, connector_id: str, every_s: int) -> bool:
        """A schedule fired: queue the sync; if the connector is still busy, look again shortly."""
        if self.enqueue(org, connector_id, "schedule") is not None:
            return True
        if self._scheduler is not None:
            now = self._clock.now()
            payload = {"connector_id": connector_id}
            self._scheduler.upsert(org, connector_id, every_s=every_s, next_at=now + BUSY_RETRY_S, payload=payload)
        return False

    def enqueue_due(self, limit: int = 500) -> int:
        """One scheduler tick (local): queue every due connector; how many were queued."""
        if self._scheduler is None:
            return 0
        queued = 0
        for s in self._scheduler.due(self._clock.now(), limit=limit):
            connector_id = str(s.payload.get("connector_id") or s.schedule_id)
            queued += int(self.on_schedule(s.org, connector_id, s.every_s))
        return queued
