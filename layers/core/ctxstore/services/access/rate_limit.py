"""Per-key token buckets. Queries and subgraph reads share the `query` class."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from ctxstore.domain.errors import ApiError, ErrorCode


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """Classic token bucket: `per_minute` refill, `burst` capacity. per_minute 0 disables a class."""

    def __init__(self, limits: dict[str, tuple[int, int]]) -> None:
        self._limits = limits  # class -> (per_minute, burst)
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return any(pm > 0 for pm, _ in self._limits.values())

    def check(self, key: str, klass: str, now: float, cost: float = 1.0) -> None:
        per_minute, burst = self._limits.get(klass, (0, 0))
        if per_minute <= 0:
            return
        capacity = float(max(burst, 1))
        rate = per_minute / 60.0
        with self._lock:
            b = self._buckets.get((key, klass))
            if b is None:
                b = self._buckets[(key, klass)] = _Bucket(capacity, now)
            b.tokens = min(capacity, b.tokens + (now - b.updated) * rate)
            b.updated = now
            if b.tokens >= cost:
                b.tokens -= cost
                return
            wait = math.ceil((cost - b.tokens) / rate)
        raise ApiError(
            ErrorCode.RATE_LIMITED,
            f"rate limit exceeded for '{klass}' requests; retry after {wait} s",
            headers={"Retry-After": str(max(wait, 1))},
        )
