"""Time formatting shared by every layer."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(ts: float) -> str:
    """RFC 3339 / ISO 8601 in UTC with a Z suffix."""
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")
