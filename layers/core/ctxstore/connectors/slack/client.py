"""The Slack Web API client's error policy: which Slack errors mean what to the sync, and the SDK's 429
retry bounded by the service's wait (see `slack` for the provider)."""

from __future__ import annotations

from typing import Any
from urllib.error import URLError

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from ctxstore.ports.connector_provider import (
    CredentialsRejected,
    ProviderContext,
    RateLimited,
    ResourceUnavailable,
    TokenExpired,
    TransientProviderError,
)

REJECTED = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "token_revoked",
        "account_inactive",
        "missing_scope",
        "no_permission",
        "not_allowed_token_type",
        "team_access_not_granted",
        "ekm_access_denied",
        "invalid_client_id",
        "bad_client_secret",
        "invalid_client",
    }
)
REFRESH_REFUSED = frozenset({"invalid_refresh_token", "refresh_token_expired", "invalid_grant", "token_revoked"})
RESOURCE_GONE = frozenset({"channel_not_found", "not_in_channel", "is_archived", "access_denied"})


def _header(headers: dict[str, Any], name: str) -> str | None:
    for k, v in headers.items():
        if k.lower() == name:
            return str(v[0] if isinstance(v, list) else v)
    return None


def _retry_after(headers: dict[str, Any]) -> float:
    try:
        return max(0.0, float(_header(headers, "retry-after") or 1))
    except ValueError:
        return 1.0


class RateLimitWithin(RateLimitErrorRetryHandler):
    """The SDK's 429 handler, bounded: it waits Retry-After through the service's sleep when that is within
    max_wait_s; a longer wait is not retried here (the call then raises RateLimited)."""

    def __init__(self, ctx: ProviderContext) -> None:
        super().__init__(max_retry_count=5)
        self._ctx = ctx

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return (
            response is not None
            and response.status_code == 429
            and _retry_after(response.headers) <= self._ctx.max_wait_s
        )

    def prepare_for_next_attempt(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        state.next_attempt_requested = True
        self._ctx.sleep(_retry_after(response.headers) if response is not None else 1.0)
        state.increment_current_attempt()


def failure(method: str, exc: SlackApiError) -> Exception:
    status = int(getattr(exc.response, "status_code", 0) or 0)
    error = ""
    try:
        error = str(exc.response.get("error") or "")
    except (AttributeError, TypeError, ValueError):
        pass
    if status == 429 or error == "ratelimited":
        wait = _retry_after(dict(getattr(exc.response, "headers", {}) or {}))
        return RateLimited(f"slack {method}: rate limited (Retry-After {wait:.0f} s)", retry_after_s=wait)
    if error == "token_expired":
        return TokenExpired(f"slack {method}: token_expired")
    if error in REJECTED:
        return CredentialsRejected(f"slack {method}: {error}")
    if error in RESOURCE_GONE:
        return ResourceUnavailable(f"slack {method}: {error}")
    return TransientProviderError(f"slack {method}: {error or f'HTTP {status}'}")


def call(method: str, fn: Any, **params: Any) -> dict[str, Any]:
    """One Web API call: its JSON, or the provider error it means (never an SDK exception)."""
    try:
        data = fn(**{k: v for k, v in params.items() if v is not None}).data
    except SlackApiError as exc:
        raise failure(method, exc) from None
    except (URLError, TimeoutError, ConnectionError, OSError, SlackClientError, ValueError) as exc:
        raise TransientProviderError(f"slack {method}: {type(exc).__name__}: {exc}") from None
    if not isinstance(data, dict):
        raise TransientProviderError(f"slack {method}: unexpected answer")
    return data
