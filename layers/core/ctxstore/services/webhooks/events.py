"""Events the service emits (`indexing.status_changed`), handed to whatever delivers them (webhooks)."""

from __future__ import annotations

from typing import Any, Protocol

INDEXING_STATUS_CHANGED = "indexing.status_changed"


class EventSink(Protocol):
    def emit(self, org: str, event_type: str, payload: dict[str, Any]) -> None:
        """Record the event durably for delivery; must not block on the network."""
        ...


class NullSink:
    """Used where no deliverer is configured (some tests, tools)."""

    def emit(self, org: str, event_type: str, payload: dict[str, Any]) -> None:
        return None
