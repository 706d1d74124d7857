"""Retry policy shared by the local runner and (as data) the Step Functions definition."""

from __future__ import annotations

import random
from dataclasses import dataclass


class TransientError(Exception):
    """A failure worth retrying (storage hiccup, timeout); anything else fails at once."""

    def __init__(self, message: str, code: str = "E6001") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    interval_s: float = 1.0
    backoff_rate: float = 2.0
    max_delay_s: float = 60.0
    jitter: bool = True

    def delay(self, attempt: int) -> float:
        """Delay before attempt `attempt + 1` (attempt counts from 1)."""
        base = min(self.max_delay_s, self.interval_s * self.backoff_rate ** (attempt - 1))
        return random.uniform(0, base) if self.jitter else base  # full jitter
