"""Every provider-requested wait a connector sits out is told to `ProviderContext.rate_limited` (the metric's
source), and only those: a wait too long to sit out, or a retry after a server error, is not one."""

from __future__ import annotations

from ctxstore.connectors.retry_budget import RATE_LIMIT_WAITS, RetryBudget
from ctxstore.ports.connector_provider import ProviderContext


def test_the_retry_budget_tells_each_wait_it_sits_out() -> None:
    told: list[float] = []
    slept: list[float] = []
    ctx = ProviderContext(
        credentials={}, auth_type="api_token", base_url="", sleep=slept.append, rate_limited=told.append, max_wait_s=5
    )
    budget = RetryBudget(ctx)
    assert budget.sit_out(2.0) and budget.sit_out(0.5)
    assert not budget.sit_out(30.0)  # beyond max_wait_s: RateLimited, not waited
    assert budget.retry()  # a 5xx backoff sleeps but is no rate-limit wait
    assert told == [2.0, 0.5] and slept == [2.0, 0.5, 1.0]
    while budget.sit_out(0.1):
        pass
    assert len(told) == RATE_LIMIT_WAITS
