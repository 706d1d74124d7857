"""An in-memory WorkflowStarter: one start per execution name, as Step Functions (a repeated name is refused)
and the local queue (a repeated job id is a no-op) both behave; `started` is what a test reads."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from ctxstore.ports.workflow import start_each


class InMemoryWorkflowStarter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started: dict[str, tuple[str, dict[str, Any]]] = {}  # execution name -> (org, payload)

    def start(self, org: str, execution_name: str, payload: dict[str, Any]) -> bool:
        body = json.loads(json.dumps(payload))  # a payload must travel as JSON, as it does to a state machine
        with self._lock:
            if execution_name in self.started:
                return False
            self.started[execution_name] = (org, body)
            return True

    def start_many(self, org: str, starts: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        return start_each(self, org, starts)
