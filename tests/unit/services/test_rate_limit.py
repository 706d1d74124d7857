from __future__ import annotations

import pytest

from ctxstore.domain.errors import ApiError
from ctxstore.services.access.rate_limit import RateLimiter


def test_bucket_refills_over_time() -> None:
    rl = RateLimiter({"default": (60, 2)})  # 1 token/s, capacity 2
    rl.check("k", "default", now=0.0)
    rl.check("k", "default", now=0.0)
    with pytest.raises(ApiError) as exc:
        rl.check("k", "default", now=0.5)
    assert exc.value.status == 429 and exc.value.headers["Retry-After"] == "1"
    rl.check("k", "default", now=1.6)  # refilled one token


def test_disabled_class_never_limits() -> None:
    rl = RateLimiter({"default": (0, 0)})
    assert not rl.enabled
    for _ in range(1000):
        rl.check("k", "default", now=0.0)
