"""HTTP for the client: headers, the envelope, errors, and bounded retries of refusals (tenacity)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_random_exponential

from ctxstore import API_VERSION
from ctxstore.client.errors import BAD_RESPONSE, UNREACHABLE, CtxstoreError

USER_AGENT = f"ctxstore-client/{API_VERSION}"
FilePart = tuple[str | None, bytes] | tuple[str, bytes, str]  # (file name or None for a plain field, data[, type])


def form_fields(fields: Mapping[str, str]) -> list[tuple[str, FilePart]]:
    """Form fields as multipart/form-data parts (the interface's request type for an ingest; no file name: the
    server reads them as text fields).

    A JSON field of 100 SciFact items (150 KB) cost 4.4 CPU-ms to percent-encode and the server 1.6 to decode as
    application/x-www-form-urlencoded (urllib quotes byte by byte), against 0.05 and 0.35 as multipart, and
    grew the body by 6 % (docs/benchmarks.md, fourteenth pass)."""
    return [(name, (None, value.encode())) for name, value in fields.items()]


class _NotConnected(CtxstoreError):
    """No connection could be opened: the request carried nothing, so any method may be sent again."""


def _retryable(exc: BaseException) -> bool:
    # 429 and 503 are refusals made before any work (rate limit, admission, a dependency down).
    # Anything else (a read timeout, a 500) might have been processed: not retried.
    return isinstance(exc, _NotConnected) or (isinstance(exc, CtxstoreError) and exc.retryable)


def _header_seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None  # an HTTP-date Retry-After: fall back to our own backoff


class Transport:
    """One connection pool to one server with one API key.

    Retries 429/503 answers (waiting what `Retry-After` asks, capped) and connections that could not be
    opened, at most `max_attempts` times and `max_retry_wait_s` seconds in all; then raises the last error.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = 60.0,
        max_attempts: int = 5,
        max_retry_wait_s: float = 60.0,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_attempts = max(1, max_attempts)
        self.max_retry_wait_s = max_retry_wait_s
        headers = {"API-Version": "2", "User-Agent": USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = http or httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers)
        if http is not None:
            self._http.headers.update(headers)
        self._backoff = wait_random_exponential(multiplier=0.5, max=8)
        self._sleep = sleep

    def close(self) -> None:
        self._http.close()

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = exc.retry_after if isinstance(exc, CtxstoreError) else None
        if asked is not None:  # honour the server, with a little jitter so waiting clients do not return together
            return min(asked, self.max_retry_wait_s) + random.uniform(0, 0.25)
        return float(self._backoff(state))

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | list[tuple[str, str]] | None = None,
        json: Any = None,
        data: Mapping[str, str] | None = None,
        files: Sequence[tuple[str, FilePart]] | None = None,
        envelope: bool = True,
        absolute_url: bool = False,
    ) -> Any:
        """Send one call (retrying refusals) and return the envelope's `data` (or the whole body if `envelope` is
        False). Raises CtxstoreError for every failure."""
        kwargs: dict[str, Any] = {
            "stop": stop_after_attempt(self.max_attempts) | stop_after_delay(self.max_retry_wait_s)
        }
        if self._sleep is not None:
            kwargs["sleep"] = self._sleep
        retrying = Retrying(wait=self._wait, retry=retry_if_exception(_retryable), reraise=True, **kwargs)
        return retrying(self._once, method, path, params, json, data, files, envelope, absolute_url)

    def _once(
        self,
        method: str,
        path: str,
        params: Any,
        json: Any,
        data: Any,
        files: Any,
        envelope: bool,
        absolute_url: bool,
    ) -> Any:
        try:
            if absolute_url:  # presigned upload targets: no API key goes to them
                response = httpx.request(method, path, data=data, files=files, timeout=self._http.timeout)
            else:
                response = self._http.request(method, path, params=params, json=json, data=data, files=files)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _NotConnected(UNREACHABLE, f"cannot connect to {self.base_url}: {exc or type(exc).__name__}") from exc
        except httpx.HTTPError as exc:
            raise CtxstoreError(UNREACHABLE, f"{type(exc).__name__} talking to {self.base_url}: {exc}") from exc
        return decode(response, envelope=envelope)


def decode(response: httpx.Response, *, envelope: bool = True) -> Any:
    """The `data` of a success envelope, or the body; CtxstoreError from a failure envelope or a non-JSON answer."""
    request_id = response.headers.get("x-request-id")
    retry_after = _header_seconds(response.headers.get("retry-after"))
    if response.status_code == 204 or not response.content:
        if response.is_success:
            return None
        raise CtxstoreError(
            f"HTTP_{response.status_code}",
            f"empty answer with HTTP {response.status_code}",
            status=response.status_code,
            request_id=request_id,
            retry_after=retry_after,
        )
    try:
        body = response.json()
    except ValueError:
        raise CtxstoreError(
            BAD_RESPONSE,
            _not_json(response),
            status=response.status_code,
            request_id=request_id,
            retry_after=retry_after,
        ) from None
    if isinstance(body, dict) and isinstance(body.get("meta"), dict):
        request_id = body["meta"].get("request_id") or request_id
    if not response.is_success or (isinstance(body, dict) and body.get("success") is False and "error" in body):
        error = body.get("error") if isinstance(body, dict) else None
        code = (
            str(error.get("code")) if isinstance(error, dict) and error.get("code") else f"HTTP_{response.status_code}"
        )
        message = str(error.get("message")) if isinstance(error, dict) else str(body)[:300]
        raise CtxstoreError(code, message, status=response.status_code, request_id=request_id, retry_after=retry_after)
    if envelope and isinstance(body, dict) and "data" in body and "success" in body:
        return body["data"]
    return body


def _not_json(response: httpx.Response) -> str:
    """Why a non-JSON answer is not ctxstore's: usually the URL points at some other web server or a proxy page."""
    ctype = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
    try:
        where = f" from {response.request.url}"
    except RuntimeError:  # a response built without its request
        where = ""
    if "json" in ctype:
        return f"a malformed JSON answer (HTTP {response.status_code}){where}: {response.text[:120]!r}"
    return f"this does not look like a ctxstore server: got {ctype} (HTTP {response.status_code}){where}"
