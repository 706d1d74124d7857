"""One Gmail API session on google-api-python-client (discovery client over httplib2) and the OAuth refresh.

Why these choices:
- The client is `build("gmail", "v1", static_discovery=True, client_options={"api_endpoint": base_url})`:
  the discovery document ships in the wheel (no network at build), and `api_endpoint` is the base URL the
  server fixes (CTXSTORE_CONNECTOR_BASE_URL_GMAIL), so a local fake or a proxy is reached the same way.
- google-auth decides when a token is due (its expiry minus its threshold, or an HTTP 401 seen by
  `AuthorizedHttp`), but the connector service owns refreshing: it serialises refreshes per connector and
  persists a rotated set before anything uses it. The data-path credentials are google-auth
  `Credentials` without a refresh token and with a `refresh_handler` that raises `TokenExpired`; the
  service then calls `refresh_oauth` (one `refresh_token` grant through google-auth's own
  `Credentials.refresh` at `ctx.token_url`) and, once stored, calls the provider again.
- `execute(num_retries=0)`: the library's own retries sleep with `time.sleep` (invisible to the service,
  not interruptible) with no bound against `max_wait_s`. Waits here go through `ctx.sleep`, within
  `ctx.max_wait_s` in total; a longer wait is `RateLimited`.

Error mapping (never a library exception out of here): 401 -> `TokenExpired` (the service refreshes once,
then it is `CredentialsRejected`); 403 that is not a quota -> `CredentialsRejected` (insufficient scopes,
domain policy); 400 `failedPrecondition` ("Mail service not enabled") -> `CredentialsRejected` with that
message; 429 and 403 `rateLimitExceeded`/`userRateLimitExceeded` -> waited (Retry-After, else 1, 2, 4 ... s)
within bound, else `RateLimited`; 404 -> the caller's `missing` (or None); 5xx, timeouts and connection
failures -> two short retries, then `TransientProviderError`. Refresh: `invalid_grant` (google-auth's
`RefreshError` with `retryable=False`) -> `RefreshRejected`; `invalid_client`/`unauthorized_client` ->
`CredentialsRejected`; a retryable refresh error or a transport failure -> `TransientProviderError`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import google.oauth2.credentials
import google_auth_httplib2
import httplib2
from google.auth import _helpers as auth_helpers
from google.auth import exceptions as auth_exceptions
from google.auth.transport import Request as AuthRequest
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from ctxstore.connectors.retry_budget import RetryBudget
from ctxstore.ports.connector_provider import (
    CredentialsRejected,
    ProviderContext,
    ProviderError,
    RateLimited,
    RefreshRejected,
    TokenExpired,
    TransientProviderError,
)

# The discovery client logs every request URL at INFO and google-auth may log token exchanges at DEBUG:
# nothing of a mailbox or its tokens belongs in the server log.
for _name in ("googleapiclient", "google.auth", "google_auth_httplib2"):
    logging.getLogger(_name).setLevel(logging.WARNING)

DEFAULT_TOKEN_URL = "https://oauth2.googleapis.com/token"
QUOTA_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded", "concurrentLimitExceeded"})
SCOPE_REASONS = frozenset({"insufficientPermissions", "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "forbidden"})
BAD_CLIENT = frozenset({"invalid_client", "unauthorized_client"})
QUOTA_WINDOW_S = 60.0  # Gmail's per-user quota is per minute: what to wait when giving up without Retry-After


class _Answer:
    """The parts of an HttpError the mapping reads."""

    def __init__(self, exc: HttpError) -> None:
        self.status = int(exc.resp.status)
        self.retry_after = _seconds(exc.resp.get("retry-after"))
        self.message = ""
        self.reasons: set[str] = set()
        try:
            body = json.loads(exc.content.decode("utf-8", "replace"))
        except ValueError:
            return
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return
        self.message = str(error.get("message") or "")
        for item in list(error.get("errors") or []) + list(error.get("details") or []):
            if isinstance(item, dict) and item.get("reason"):
                self.reasons.add(str(item["reason"]))
        if error.get("status"):
            self.reasons.add(str(error["status"]))


def _seconds(value: object) -> float | None:
    try:
        return max(0.0, float(str(value))) if value is not None else None
    except ValueError:
        return None


def _expiry(credentials: dict[str, Any]) -> datetime | None:
    """The expiry to give google-auth (naive UTC) so that it calls a token due exactly at `expires_at`: it
    subtracts its own threshold (3 min 45 s), and the service already refreshes 5 minutes early before a
    sync, so a token with a minute left (a connector created from a fresh grant) is still used."""
    expires_at = credentials.get("expires_at")
    if isinstance(expires_at, int | float) and not isinstance(expires_at, bool):
        return datetime.fromtimestamp(float(expires_at), UTC).replace(tzinfo=None) + auth_helpers.REFRESH_THRESHOLD
    return None


class GmailSession:
    """The Gmail API for one provider call (one sync, one discover): one HTTP connection pool, one token."""

    def __init__(self, ctx: ProviderContext) -> None:
        self._ctx = ctx
        creds = google.oauth2.credentials.Credentials(  # type: ignore[no-untyped-call]
            token=str(ctx.credentials.get("access_token") or "") or None,
            expiry=_expiry(ctx.credentials),
            refresh_handler=self._due,
        )
        http = google_auth_httplib2.AuthorizedHttp(creds, http=httplib2.Http(timeout=max(1, int(ctx.http_timeout_s))))
        self.api = build(
            "gmail",
            "v1",
            http=http,
            static_discovery=True,
            cache_discovery=False,
            client_options={"api_endpoint": ctx.base_url},
        )

    @staticmethod
    def _due(request: AuthRequest, scopes: Sequence[str] | None = None) -> tuple[str, datetime]:
        """google-auth wants a fresh token (expiry reached, or a 401): the connector service refreshes."""
        raise TokenExpired("gmail: the access token expired or was refused; refreshing")

    def call(
        self,
        method: str,
        make: Callable[[Any], Any],
        *,
        missing: type[ProviderError] | None = None,
        bad_request: type[ProviderError] | None = None,
    ) -> dict[str, Any] | None:
        """Execute one API request (`make(api)` builds it): its JSON, None on a 404 without `missing`.
        `bad_request`: what a 400 other than failedPrecondition means here (e.g. a label that is gone)."""
        waited = 0.0
        quota_waits = 0
        budget = RetryBudget(self._ctx)  # its server retries; quota waits follow Google's backoff advice below
        while True:
            try:
                data = make(self.api).execute(num_retries=0)
            except HttpError as exc:
                a = _Answer(exc)
                if a.status == 429 or (a.status == 403 and a.reasons & QUOTA_REASONS):
                    wait = a.retry_after if a.retry_after is not None else float(2**quota_waits)
                    if waited + wait > self._ctx.max_wait_s:
                        retry = a.retry_after if a.retry_after is not None else max(wait, QUOTA_WINDOW_S)
                        raise RateLimited(
                            f"gmail {method}: quota exceeded ({', '.join(sorted(a.reasons)) or a.status});"
                            f" retry in {retry:.0f} s",
                            retry_after_s=retry,
                        ) from None
                    quota_waits += 1
                    waited += wait
                    self._ctx.sleep(wait)
                    continue
                if a.status >= 500 and budget.retry():
                    continue
                if a.status == 404:
                    if missing is None:
                        return None
                    raise missing(f"gmail {method}: not found ({a.message or 404})") from None
                if a.status == 400 and bad_request is not None and not _mail_disabled(a):
                    raise bad_request(f"gmail {method}: HTTP 400: {a.message}") from None
                raise _error(method, a) from None
            except (TimeoutError, httplib2.HttpLib2Error, OSError) as exc:
                if budget.retry():
                    continue
                raise TransientProviderError(f"gmail {method}: {type(exc).__name__}: {exc}") from None
            if not isinstance(data, dict):
                raise TransientProviderError(f"gmail {method}: unexpected answer")
            return data


def _mail_disabled(a: _Answer) -> bool:
    return a.status == 400 and bool(a.reasons & {"failedPrecondition", "FAILED_PRECONDITION"})


def _error(method: str, a: _Answer) -> ProviderError:
    detail = f"gmail {method}: HTTP {a.status}" + (f": {a.message}" if a.message else "")
    if a.status == 401:
        return TokenExpired(detail)
    if _mail_disabled(a):
        return CredentialsRejected(f"{detail} (the account has no Gmail mailbox)")
    if a.status == 403:
        if a.reasons & SCOPE_REASONS:
            return CredentialsRejected(f"{detail} (grant the scope https://www.googleapis.com/auth/gmail.readonly)")
        return CredentialsRejected(detail)
    return TransientProviderError(detail)


def refresh_oauth(ctx: ProviderContext) -> dict[str, Any]:
    """One refresh-token grant at ctx.token_url through google-auth: the whole credential set with the new
    access token, its expiry and (when Google rotated it) the new refresh token. Stores nothing."""
    c = ctx.credentials
    creds = google.oauth2.credentials.Credentials(  # type: ignore[no-untyped-call]
        token=None,
        refresh_token=str(c.get("refresh_token") or ""),
        token_uri=ctx.token_url or DEFAULT_TOKEN_URL,
        client_id=str(c.get("client_id") or ""),
        client_secret=str(c.get("client_secret") or ""),
    )
    try:
        transport = google_auth_httplib2.Request(httplib2.Http(timeout=max(1, int(ctx.http_timeout_s))))
        creds.refresh(transport)  # type: ignore[no-untyped-call]
    except auth_exceptions.RefreshError as exc:
        data = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
        error = str(data.get("error") or "")
        described = f"{error}: {data.get('error_description')}" if error else str(exc.args[0] if exc.args else "")
        if error in BAD_CLIENT:
            raise CredentialsRejected(f"Google rejected the OAuth client ({described})") from None
        if exc.retryable:
            raise TransientProviderError(f"Google's token endpoint could not refresh now ({described})") from None
        raise RefreshRejected(f"Google refused the refresh token ({described}): authorise the mailbox again") from None
    except auth_exceptions.TransportError as exc:
        raise TransientProviderError(f"Google's token endpoint is unreachable ({type(exc).__name__})") from None
    if not creds.token:
        raise TransientProviderError("Google's token endpoint answered without an access token")
    rotated = {**c, "access_token": str(creds.token)}
    if creds.refresh_token and creds.refresh_token != c.get("refresh_token"):
        rotated["refresh_token"] = str(creds.refresh_token)
    if creds.expiry is not None:
        # In the service's clock: what is left of google-auth's expiry (which it computed from expires_in).
        left = (creds.expiry - datetime.now(UTC).replace(tzinfo=None)).total_seconds()
        rotated["expires_at"] = ctx.now() + left
    else:
        rotated.pop("expires_at", None)
    return rotated
