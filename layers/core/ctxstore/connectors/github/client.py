"""One GitHub API session on githubkit (PAT or OAuth access token), its GETs and error policy; the OAuth refresh.

Why these choices:
- Calls go through ``GitHub.request`` (githubkit's core: auth flow, base URL, rate-limit detection, typed
  errors) rather than the generated ``rest.*`` methods, because those send ``since`` as ``str(datetime)``
  (``2026-01-01 00:00:00+00:00``) where GitHub documents ``YYYY-MM-DDTHH:MM:SSZ``, and because validating
  100 full pydantic ``Issue`` models per page costs more than the mapping that reads a dozen fields.
- githubkit's ``auto_retry`` is off: it sleeps with ``time.sleep`` (invisible to the service, not
  interruptible) and retries 5xx three times with no bound against ``max_wait_s``. Waits here go through
  ``ctx.sleep`` and never exceed ``ctx.max_wait_s``; a longer requested wait is ``RateLimited``.
- The hishel HTTP cache is off: ETags are kept in the sync checkpoint instead (they must survive a
  restart), and a cache would turn GitHub's 304 back into a 200 the sync could not tell apart.
- OAuth: the connector service owns refreshing (it serialises refreshes and persists the rotated set
  before the next call). ``refresh_oauth`` is the one token-endpoint exchange it asks for, at
  ``ctx.token_url`` (githubkit derives the token URL from the API base and keeps rotated tokens to itself);
  a 401 on an OAuth connector is ``TokenExpired`` so the service refreshes and calls once more.

Error mapping (never an SDK exception out of here): 401 -> ``CredentialsRejected`` (``TokenExpired`` for
OAuth); 403 that is not a rate limit -> ``CredentialsRejected``; primary (403/429 + ``x-ratelimit-remaining:
0``) and secondary (``retry-after``, or a 403 whose message names a secondary limit) rate limits -> wait
within bound, else ``RateLimited``; 404/410 -> the caller's ``missing`` error (``ResourceUnavailable`` for a repo); 5xx,
timeouts and connection failures -> two short retries, then ``TransientProviderError``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import httpx
from githubkit import BaseAuthStrategy, GitHub, GitHubCore
from githubkit.exception import GitHubException, RequestError, RequestFailed, RequestTimeout

from ctxstore.connectors.oauth_refresh import refresh_token_grant
from ctxstore.connectors.retry_after import retry_after_s
from ctxstore.connectors.retry_budget import RetryBudget
from ctxstore.ports.connector_provider import (
    CredentialsRejected,
    ProviderContext,
    ProviderError,
    RateLimited,
    ResourceUnavailable,
    TokenExpired,
    TransientProviderError,
)

API_VERSION = "2022-11-28"  # the REST version GitHub serves to every client; Enterprise Server knows it too
USER_AGENT = "ctxstore-connector"
DEFAULT_TOKEN_URL = "https://github.com/login/oauth/access_token"
DEFAULT_LIMIT_WAIT_S = 60.0  # GitHub's advice when a limit names no time
# One TLS context for every session: httpx otherwise loads the CA bundle per client (~85 ms a call here).
_TLS = httpx.create_ssl_context()
_SECONDARY = re.compile(r"secondary rate limit|abuse detection", re.I)  # a 403 limit without headers
_LINK_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


@dataclass(frozen=True)
class Reply:
    status: int  # 200, or 304 for a conditional request that matched
    data: Any  # parsed JSON; None on 304
    etag: str | None
    next_page: int | None  # the `page` of the Link rel="next" URL


class _LiveToken(BaseAuthStrategy):
    """Reads the session's current token on every request, so a refresh applies to the open client."""

    def __init__(self, session: GitHubSession) -> None:
        self._session = session

    def get_auth_flow(self, github: GitHubCore[Any]) -> httpx.Auth:
        session = self._session

        class _Flow(httpx.Auth):
            def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
                request.headers["Authorization"] = f"token {session.access_token}"
                yield request

        return _Flow()


class GitHubSession:
    """Use as a context manager to keep one HTTP connection pool for a whole sync."""

    def __init__(self, ctx: ProviderContext) -> None:
        self._ctx = ctx
        self._gh: GitHub[_LiveToken] = GitHub(
            _LiveToken(self),
            base_url=ctx.base_url,
            user_agent=USER_AGENT,
            timeout=ctx.http_timeout_s,
            ssl_verify=_TLS,
            http_cache=False,
            auto_retry=False,
        )

    def __enter__(self) -> GitHubSession:
        self._gh.__enter__()  # type: ignore[no-untyped-call]  # githubkit leaves __enter__ unannotated
        return self

    def __exit__(self, *exc: object) -> None:
        self._gh.__exit__()

    @property
    def access_token(self) -> str:
        creds = self._ctx.credentials  # read per request: the service swaps in a refreshed set
        return str(creds.get("api_token") or creds.get("access_token") or "")

    # ---- requests ---------------------------------------------------------------------------------

    def get(
        self,
        path: str,
        params: dict[str, str | int] | None = None,
        *,
        etag: str | None = None,
        missing: type[ProviderError] = ResourceUnavailable,
    ) -> Reply:
        """GET a path under the API base; ``etag`` makes it conditional (a 304 costs no rate limit)."""
        headers = {"X-GitHub-Api-Version": API_VERSION}
        if etag:
            headers["If-None-Match"] = etag
        budget = RetryBudget(self._ctx)
        while True:
            try:
                response = self._gh.request("GET", path, params=params, headers=headers)
            except RequestFailed as exc:
                raw = exc.response.raw_response
                wait = self._rate_limit_wait(raw)
                if wait is not None:
                    if budget.sit_out(wait):
                        continue
                    raise RateLimited(
                        f"GitHub rate limit on GET {path}: retry in {math.ceil(wait)} s", retry_after_s=wait
                    ) from None
                status = raw.status_code
                if status >= 500 and budget.retry():
                    continue
                raise self._error_for(status, raw, path, missing, oauth=self._ctx.auth_type == "oauth") from None
            except RequestError as exc:  # timeouts and connection failures (RequestFailed is handled above)
                if budget.retry():
                    continue
                what = "timed out" if isinstance(exc, RequestTimeout) else f"unreachable ({type(exc.exc).__name__})"
                raise TransientProviderError(f"GitHub {what} on GET {path}") from None
            except GitHubException as exc:
                raise ProviderError(f"GitHub client error on GET {path}: {type(exc).__name__}") from None
            raw = response.raw_response
            if raw.status_code == 304:
                return Reply(304, None, raw.headers.get("etag"), None)
            try:
                data = raw.json()
            except ValueError:
                raise TransientProviderError(f"GitHub sent a body that is not JSON on GET {path}") from None
            return Reply(raw.status_code, data, raw.headers.get("etag"), _next_page(raw.headers.get("link")))

    def _rate_limit_wait(self, raw: httpx.Response) -> float | None:
        """Seconds GitHub asks to wait, or None when the response is not a rate limit."""
        headers = raw.headers
        if raw.status_code not in (403, 429):
            return None
        retry_after = retry_after_s(headers.get("retry-after"), DEFAULT_LIMIT_WAIT_S)
        if retry_after is not None:
            return retry_after
        if headers.get("x-ratelimit-remaining") == "0":
            reset = headers.get("x-ratelimit-reset")
            try:
                return max(1.0, float(reset) - self._ctx.now() + 1.0) if reset else DEFAULT_LIMIT_WAIT_S
            except ValueError:
                return DEFAULT_LIMIT_WAIT_S
        if raw.status_code == 429 or _SECONDARY.search(raw.text):
            return DEFAULT_LIMIT_WAIT_S  # GitHub: with no header to go by, wait at least a minute
        return None

    @staticmethod
    def _error_for(
        status: int, raw: httpx.Response, path: str, missing: type[ProviderError], *, oauth: bool
    ) -> ProviderError:
        try:
            body = raw.json()
            message = str(body.get("message", "")) if isinstance(body, dict) else ""
        except ValueError:
            message = ""
        detail = f"GitHub answered {status} on GET {path}" + (f": {message}" if message else "")
        if status == 401:
            return TokenExpired(detail) if oauth else CredentialsRejected(detail)
        if status == 403:
            return CredentialsRejected(detail + " (missing scope or no access)")
        if status in (404, 410):
            return missing(detail)
        if status >= 500:
            return TransientProviderError(detail)
        return ProviderError(detail)


def refresh_oauth(ctx: ProviderContext) -> dict[str, Any]:
    """One refresh-token exchange at ``ctx.token_url``: the whole credential set with the new access token,
    the rotated refresh token (GitHub invalidates the old one) and their expiry times. Stores nothing.
    GitHub answers a refused grant with HTTP 200 and ``bad_refresh_token``; the shared grant reads the body."""
    return refresh_token_grant(
        ctx, provider="GitHub", token_url=ctx.token_url or DEFAULT_TOKEN_URL, user_agent=USER_AGENT
    )


def _next_page(link: str | None) -> int | None:
    if not link:
        return None
    match = _LINK_NEXT.search(link)
    if not match:
        return None
    page = httpx.URL(match.group(1)).params.get("page")
    return int(page) if page and page.isdigit() else None
