"""One Notion API session on notion-client (internal integration secret or OAuth access token), its calls and
error policy; the OAuth refresh through the SDK's `oauth.token`.

Why these choices:
- The SDK's own retry is off (`retry=False`): it sleeps with `time.sleep` (invisible to the service, not
  interruptible) and caps a `Retry-After` at 60 s regardless of `ctx.max_wait_s`. Waits here go through
  `ctx.sleep` and never exceed `ctx.max_wait_s`; a longer requested wait is `RateLimited`.
- The token is sent per request (`auth=`), read from `ctx.credentials` each time, so a refresh the service
  does mid-sync applies to the open client.
- The SDK is given a logger: without one it adds a stdout handler to `notion_client` per client built.
- The Notion-Version header is the SDK's default (2025-09-03: data sources, `data_sources.query`).

Error mapping (never an SDK exception out of here): 401 `unauthorized` -> `CredentialsRejected`
(`TokenExpired` for OAuth, so the service refreshes and calls once more); 403 `restricted_resource` ->
`CredentialsRejected`; 404 `object_not_found` (deleted, or not shared with the integration) -> the caller's
`missing` error (`ResourceUnavailable` for a resource's own page or data source); 429 `rate_limited` -> wait
`Retry-After` within bound (at most RATE_LIMIT_WAITS times per request), else `RateLimited`; 5xx, 529,
timeouts, connection failures -> two retries after 1 s and 2 s, then `TransientProviderError`; other 4xx
(`validation_error`, ...) -> `RequestRefused`, a `TransientProviderError` the sync may handle (a stale
query cursor).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import httpx
from notion_client import Client
from notion_client.errors import HTTPResponseError, InvalidPathParameterError, RequestTimeoutError

from ctxstore.connectors.retry_budget import RetryBudget
from ctxstore.ports.connector_provider import (
    CredentialsRejected,
    ProviderContext,
    ProviderError,
    RateLimited,
    RefreshRejected,
    ResourceUnavailable,
    TokenExpired,
    TransientProviderError,
)

DEFAULT_RETRY_AFTER_S = 1.0  # Notion documents Retry-After on every 429; without one, a second
TOKEN_PATH = "/v1/oauth/token"
DEFAULT_TOKEN_URL = "https://api.notion.com/v1/oauth/token"
REJECTED_GRANTS = frozenset({"invalid_grant", "invalid_refresh_token", "expired_token"})
BAD_CLIENT = frozenset({"invalid_client", "unauthorized_client"})
# One TLS context for every session: httpx otherwise loads the CA bundle per client.
_TLS = httpx.create_ssl_context()
_SDK_LOG = logging.getLogger("ctxstore.connectors.notion_sdk")


class RequestRefused(TransientProviderError):
    """Notion refused the request itself (400 validation_error, invalid_request, conflict)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def _client(base_url: str, timeout_s: float) -> Client:
    return Client(
        client=httpx.Client(verify=_TLS),
        base_url=base_url.rstrip("/"),
        timeout_ms=int(timeout_s * 1000),
        retry=False,
        logger=_SDK_LOG,
        log_level=logging.CRITICAL,
    )


def _retry_after(error: HTTPResponseError) -> float:
    try:
        return max(0.0, float(error.headers.get("retry-after") or DEFAULT_RETRY_AFTER_S))
    except ValueError:
        return DEFAULT_RETRY_AFTER_S


def _error_code(error: HTTPResponseError) -> str:
    """The API's `code` (or an OAuth `error`) from the raw body: the SDK keeps only codes it knows."""
    code = str(error.code.value if hasattr(error.code, "value") else error.code)
    try:
        body = json.loads(error.body)
    except (TypeError, ValueError):
        return code
    if isinstance(body, dict):
        return str(body.get("error") or body.get("code") or code)
    return code


class NotionSession:
    """Use as a context manager to keep one HTTP connection pool for a whole sync."""

    def __init__(self, ctx: ProviderContext) -> None:
        self._ctx = ctx
        self._client = _client(ctx.base_url, ctx.http_timeout_s)

    def __enter__(self) -> NotionSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    @property
    def _token(self) -> str:
        return str(self._ctx.credentials.get("access_token") or "")

    # ---- the calls the provider makes ------------------------------------------------------------
    def me(self) -> dict[str, Any]:
        return self.call("users.me", lambda auth: self._client.users.me(auth=auth), missing=CredentialsRejected)

    def search(self, kind: str, *, cursor: str | None = None, page_size: int = 100) -> dict[str, Any]:
        """One page of `POST /v1/search` over pages or data sources, most recently edited first."""
        body: dict[str, Any] = {
            "filter": {"property": "object", "value": kind},
            "sort": {"timestamp": "last_edited_time", "direction": "descending"},
            "page_size": page_size,
        }
        if cursor:
            body["start_cursor"] = cursor
        return self.call("search", lambda auth: self._client.search(auth=auth, **body))

    def page(self, page_id: str, *, missing: type[ProviderError] = ResourceUnavailable) -> dict[str, Any]:
        return self.call(
            "pages.retrieve", lambda auth: self._client.pages.retrieve(page_id, auth=auth), missing=missing
        )

    def block(self, block_id: str, *, missing: type[ProviderError] = ResourceUnavailable) -> dict[str, Any]:
        return self.call(
            "blocks.retrieve", lambda auth: self._client.blocks.retrieve(block_id, auth=auth), missing=missing
        )

    def children(
        self, block_id: str, cursor: str | None, *, missing: type[ProviderError] = ResourceUnavailable
    ) -> dict[str, Any]:
        kw: dict[str, Any] = {"page_size": 100}
        if cursor:
            kw["start_cursor"] = cursor
        return self.call(
            "blocks.children.list",
            lambda auth: self._client.blocks.children.list(block_id, auth=auth, **kw),
            missing=missing,
        )

    def data_source(self, data_source_id: str) -> dict[str, Any]:
        return self.call(
            "data_sources.retrieve", lambda auth: self._client.data_sources.retrieve(data_source_id, auth=auth)
        )

    def query(self, data_source_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.call(
            "data_sources.query", lambda auth: self._client.data_sources.query(data_source_id, auth=auth, **body)
        )

    # ---- one request with the error policy ---------------------------------------------------------
    def call(
        self, what: str, fn: Callable[[str], Any], *, missing: type[ProviderError] = ResourceUnavailable
    ) -> dict[str, Any]:
        budget = RetryBudget(self._ctx)
        while True:
            try:
                out = fn(self._token)
            except HTTPResponseError as exc:
                code, status = _error_code(exc), exc.status
                if status == 429 or code == "rate_limited":
                    wait = _retry_after(exc)
                    if budget.sit_out(wait):
                        continue
                    raise RateLimited(
                        f"notion {what}: rate limited (Retry-After {math.ceil(wait)} s)", retry_after_s=wait
                    ) from None
                if status >= 500 and budget.retry():
                    continue
                raise self._error_for(what, status, code, missing) from None
            except (RequestTimeoutError, httpx.HTTPError) as exc:
                if budget.retry():
                    continue
                raise TransientProviderError(f"notion {what}: {type(exc).__name__}") from None
            except InvalidPathParameterError:
                raise missing(f"notion {what}: not a Notion id") from None
            if not isinstance(out, dict):
                raise TransientProviderError(f"notion {what}: unexpected answer")
            return out

    def _error_for(self, what: str, status: int, code: str, missing: type[ProviderError]) -> ProviderError:
        detail = f"notion {what}: {code} (HTTP {status})"
        if status == 401 or code == "unauthorized":
            return TokenExpired(detail) if self._ctx.auth_type == "oauth" else CredentialsRejected(detail)
        if status == 403 or code == "restricted_resource":
            return CredentialsRejected(detail + ": the integration lacks a capability or access")
        if status == 404 or code == "object_not_found":
            return missing(detail + ": deleted, or no longer shared with the integration")
        if status >= 500:
            return TransientProviderError(detail)
        return RequestRefused(detail, code)


def _token_base(token_url: str) -> str:
    """The SDK's base URL for a token endpoint: the SDK always posts to `{base}/v1/oauth/token`."""
    url = token_url.rstrip("/")
    if not url.endswith(TOKEN_PATH):
        raise TransientProviderError(
            f"CTXSTORE_CONNECTOR_TOKEN_URL_NOTION must end with {TOKEN_PATH} (got {url!r}): fix the server setting"
        )
    return url[: -len(TOKEN_PATH)]


def refresh_oauth(ctx: ProviderContext) -> dict[str, Any]:
    """One refresh-token exchange (`POST /v1/oauth/token`, basic auth with the client id and secret): the
    whole credential set with the new access token and the rotated refresh token. Stores nothing."""
    creds = ctx.credentials
    if not creds.get("refresh_token"):
        raise CredentialsRejected("no refresh_token to renew the Notion access token with")
    client = _client(_token_base(ctx.token_url or DEFAULT_TOKEN_URL), ctx.http_timeout_s)
    try:
        body = client.oauth.token(
            client_id=str(creds.get("client_id", "")),
            client_secret=str(creds.get("client_secret", "")),
            grant_type="refresh_token",
            refresh_token=str(creds["refresh_token"]),
        )
    except HTTPResponseError as exc:
        code = _error_code(exc)
        if code in REJECTED_GRANTS:
            raise RefreshRejected(f"Notion refused the refresh token ({code}): authorise the connector again") from None
        if code in BAD_CLIENT or exc.status == 401:
            raise CredentialsRejected(f"Notion refused the OAuth client credentials ({code})") from None
        if exc.status == 429:
            wait = _retry_after(exc)
            raise RateLimited(
                f"notion oauth.token: rate limited (Retry-After {wait:.0f} s)", retry_after_s=wait
            ) from None
        raise TransientProviderError(f"notion oauth.token: {code} (HTTP {exc.status})") from None
    except (RequestTimeoutError, httpx.HTTPError) as exc:
        raise TransientProviderError(f"notion oauth.token: {type(exc).__name__}") from None
    finally:
        client.close()
    if not isinstance(body, dict) or not body.get("access_token"):
        raise TransientProviderError("notion oauth.token: no access_token in the answer")
    rotated = {**creds, "access_token": str(body["access_token"])}
    if body.get("refresh_token"):
        rotated["refresh_token"] = str(body["refresh_token"])
    if isinstance(body.get("expires_in"), int | float) and not isinstance(body.get("expires_in"), bool):
        rotated["expires_at"] = ctx.now() + float(body["expires_in"])
    else:
        rotated.pop("expires_at", None)  # Notion did not say: refreshed on the next 401 instead
    return rotated
