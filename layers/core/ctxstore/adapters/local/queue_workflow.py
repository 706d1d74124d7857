"""WorkflowStarter on the local durable queue: one job per execution name, run by the local runner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxstore.ports.work_queue import WorkQueue
from ctxstore.ports.workflow import INGEST_QUEUE


class QueueWorkflowStarter:
    def __init__(self, queue: WorkQueue, queue_name: str = INGEST_QUEUE) -> None:
        self._queue = queue
        self._name = queue_name

    def start(self, org: str, execution_name: str, payload: dict[str, Any]) -> bool:
        return self._queue.enqueue(org, self._name, execution_name, payload)

    def start_many(self, org: str, starts: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        return self._queue.enqueue_many(org, self._name, starts)
