"""A small typed GraphQL client for Linear's API on httpx, with Linear's error and rate-limit policy.

Why not a library: Linear ships no official Python SDK (its SDK is TypeScript). ``gql`` would add a schema
layer and transports this connector does not use; one POST of ``{query, variables, operationName}`` with
httpx (already a dependency) is the whole protocol. The endpoint is ``ctx.base_url`` (the full GraphQL URL,
``CTXSTORE_CONNECTOR_BASE_URL_LINEAR``, default ``https://api.linear.app/graphql``).

Auth: a personal API key goes in ``Authorization: <key>``, an OAuth access token as ``Bearer`` (linear_info).
The header is built per request from ``ctx.credentials``, so a token the service refreshed mid-sync applies
to the open session.

Error mapping (Linear answers most GraphQL errors with HTTP 400 and ``errors[].extensions.code``; never an
httpx or GraphQL error out of here):
- ``RATELIMITED`` (HTTP 400, Linear's documented form) or HTTP 429: wait for the reset Linear names
  (``Retry-After`` seconds, else the ``X-RateLimit-*-Reset`` headers of the exhausted budget, epoch ms), at
  most ``RATE_LIMIT_WAITS`` times per request and never longer than ``ctx.max_wait_s``; else
  ``RateLimited(retry_after_s)``.
- ``AUTHENTICATION_ERROR`` or HTTP 401: ``TokenExpired`` for an OAuth connector (the service refreshes and
  calls once more), ``CredentialsRejected`` for an API key.
- ``FORBIDDEN`` or HTTP 403: the caller's ``forbidden`` error (``ResourceUnavailable`` for a team query: a team
  the user lost access to is a per-resource failure; ``CredentialsRejected`` otherwise).
- ``ENTITY_NOT_FOUND`` / "Entity not found": the caller's ``missing`` error.
- 5xx, ``INTERNAL_SERVER_ERROR``, timeouts, connection failures: two retries after 1 s and 2 s, then
  ``TransientProviderError``.
- anything else (a query Linear's schema refuses): ``ProviderError`` with Linear's message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx

from ctxstore.connectors.linear.info import authorization
from ctxstore.connectors.retry_after import retry_after_s
from ctxstore.connectors.retry_budget import RetryBudget
from ctxstore.ports.connector_provider import (
    CredentialsRejected,
    ProviderContext,
    ProviderError,
    RateLimited,
    TokenExpired,
    TransientProviderError,
)

JSON = dict[str, Any]
USER_AGENT = "ctxstore-connector"
DEFAULT_ENDPOINT = "https://api.linear.app/graphql"
DEFAULT_LIMIT_WAIT_S = 60.0  # when a rate-limit answer names no reset time
# Reset headers per budget, each paired with its remaining-count header (the exhausted one is waited for).
RESET_HEADERS = (
    ("x-ratelimit-requests-remaining", "x-ratelimit-requests-reset"),
    ("x-ratelimit-complexity-remaining", "x-ratelimit-complexity-reset"),
    ("x-ratelimit-endpoint-requests-remaining", "x-ratelimit-endpoint-requests-reset"),
)
# One TLS context for every session: httpx otherwise loads the CA bundle per client.
_TLS = httpx.create_ssl_context()


@dataclass(frozen=True)
class GraphQLError:
    message: str
    code: str


class LinearSession:
    """Use as a context manager to keep one HTTP connection pool for a whole sync."""

    def __init__(self, ctx: ProviderContext) -> None:
        self._ctx = ctx
        self._http = httpx.Client(
            timeout=ctx.http_timeout_s,
            verify=_TLS,
            headers={"User-Agent": USER_AGENT, "Content-Type": "application/json", "Accept": "application/json"},
        )
        self.requests = 0  # requests sent (benchmarks and tests read it)

    def __enter__(self) -> LinearSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def query(
        self,
        document: str,
        variables: JSON | None = None,
        *,
        operation: str,
        forbidden: type[ProviderError] = CredentialsRejected,
        missing: type[ProviderError] = ProviderError,
    ) -> JSON:
        """Run one GraphQL operation; its ``data`` when Linear answered without errors (see module doc)."""
        body = {"query": document, "variables": variables or {}, "operationName": operation}
        budget = RetryBudget(self._ctx)
        while True:
            headers = {"Authorization": authorization(self._ctx.auth_type, self._ctx.credentials)}
            try:
                self.requests += 1
                response = self._http.post(self._ctx.base_url or DEFAULT_ENDPOINT, json=body, headers=headers)
            except httpx.TransportError as exc:  # timeouts and connection failures
                if budget.retry():
                    continue
                what = "timed out" if isinstance(exc, httpx.TimeoutException) else f"unreachable ({type(exc).__name__})"
                raise TransientProviderError(f"Linear {what} on {operation}") from None
            errors, data = _parse(response)
            codes = {e.code for e in errors}
            if "RATELIMITED" in codes or response.status_code == 429:
                wait = self._rate_limit_wait(response)
                if budget.sit_out(wait):
                    continue
                raise RateLimited(f"Linear rate limited {operation}: retry in {math.ceil(wait)} s", retry_after_s=wait)
            unreadable = data is None and not errors  # not a GraphQL answer (a proxy's error page)
            transient = response.status_code >= 500 or "INTERNAL_SERVER_ERROR" in codes or unreadable
            if transient and budget.retry():
                continue
            if errors or transient:
                raise self._error_for(response.status_code, errors, operation, forbidden, missing)
            assert data is not None
            return data

    def _rate_limit_wait(self, response: httpx.Response) -> float:
        """Seconds until the budget Linear says is spent refills (Retry-After first, then the reset headers)."""
        headers = response.headers
        retry_after = retry_after_s(headers.get("retry-after"), DEFAULT_LIMIT_WAIT_S)
        if retry_after is not None:
            return retry_after
        resets: list[float] = []
        for remaining, reset in RESET_HEADERS:
            at = _epoch_s(headers.get(reset))
            if at is not None and _number(headers.get(remaining), 1.0) <= 0:
                resets.append(at)
        if not resets:  # no budget says it is spent: wait for the latest reset Linear named
            resets = [at for _, reset in RESET_HEADERS if (at := _epoch_s(headers.get(reset))) is not None]
        if not resets:
            return DEFAULT_LIMIT_WAIT_S
        return max(1.0, max(resets) - self._ctx.now() + 1.0)

    def _error_for(
        self,
        status: int,
        errors: list[GraphQLError],
        operation: str,
        forbidden: type[ProviderError],
        missing: type[ProviderError],
    ) -> ProviderError:
        codes = {e.code for e in errors}
        message = "; ".join(e.message for e in errors[:3])[:500] or f"HTTP {status}"
        detail = f"Linear answered {status} on {operation}: {message}"
        if status == 401 or codes & {"AUTHENTICATION_ERROR", "UNAUTHENTICATED"}:
            return TokenExpired(detail) if self._ctx.auth_type == "oauth" else CredentialsRejected(detail)
        if status == 403 or "FORBIDDEN" in codes:
            return forbidden(detail)
        if "ENTITY_NOT_FOUND" in codes or any("entity not found" in e.message.lower() for e in errors):
            return missing(detail)
        if status >= 500 or "INTERNAL_SERVER_ERROR" in codes or not errors:
            return TransientProviderError(detail)
        return ProviderError(detail)


def _parse(response: httpx.Response) -> tuple[list[GraphQLError], JSON | None]:
    """(errors, data) of a GraphQL answer; a body that is not a GraphQL answer has neither."""
    try:
        body = response.json()
    except ValueError:
        return [], None
    if not isinstance(body, dict):
        return [], None
    errors: list[GraphQLError] = []
    for e in body.get("errors") or []:
        if not isinstance(e, dict):
            continue
        ext = e.get("extensions") if isinstance(e.get("extensions"), dict) else {}
        errors.append(GraphQLError(str(e.get("message") or ""), str((ext or {}).get("code") or "")))
    data = body.get("data")
    return errors, data if isinstance(data, dict) else None


def _number(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def _epoch_s(value: str | None) -> float | None:
    """Linear's reset headers are epoch milliseconds; accept epoch seconds too."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number / 1000.0 if number > 1e11 else number
