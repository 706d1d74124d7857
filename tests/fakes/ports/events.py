"""An EventSink that keeps what it is given, in order (the webhook service is the real one)."""

from __future__ import annotations

import json
import threading
from typing import Any


class RecordingEventSink:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, str, dict[str, Any]]] = []  # (org, event type, payload)

    def emit(self, org: str, event_type: str, payload: dict[str, Any]) -> None:
        body = json.loads(json.dumps(payload))  # events are delivered as JSON
        with self._lock:
            self.events.append((org, event_type, body))
