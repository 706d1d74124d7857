"""One provider request's allowance of waits and retries: the policy every HTTP provider client follows.

A provider-requested wait (rate limit) is sat out through ``ctx.sleep`` when it is within ``ctx.max_wait_s``,
at most ``RATE_LIMIT_WAITS`` times; a 5xx, timeout or connection failure is retried ``SERVER_RETRIES`` times,
1 s then 2 s apart. The caller raises its provider's error when the budget says no.
"""

from __future__ import annotations

from ctxstore.ports.connector_provider import ProviderContext

SERVER_RETRIES = 2  # extra attempts after a 5xx or timeout, with 1 s then 2 s between them
RATE_LIMIT_WAITS = 3  # rate-limit waits sat out within one request before giving up with RateLimited


class RetryBudget:
    def __init__(self, ctx: ProviderContext) -> None:
        self._ctx = ctx
        self._waits = 0
        self._retries = 0

    def sit_out(self, wait: float) -> bool:
        """Sleep a provider-requested wait and answer True, or False when it is too long or one too many."""
        if wait > self._ctx.max_wait_s or self._waits >= RATE_LIMIT_WAITS:
            return False
        self._waits += 1
        self._ctx.rate_limited(wait)
        self._ctx.sleep(wait)
        return True

    def retry(self) -> bool:
        """After a server error or a transport failure: back off and answer True while retries remain."""
        if self._retries >= SERVER_RETRIES:
            return False
        self._retries += 1
        self._ctx.sleep(float(self._retries))
        return True
