"""The ``Retry-After`` header as providers send it (delta-seconds), shared by the HTTP providers' rate-limit waits."""

from __future__ import annotations


def retry_after_s(value: str | None, default: float) -> float | None:
    """Seconds to wait; ``default`` when the header is unreadable (an HTTP date); None when there is none."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return default
