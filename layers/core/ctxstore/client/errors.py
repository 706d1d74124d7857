"""The one error type the client raises: the API's `error.code` and message, the HTTP status, the request id."""

from __future__ import annotations

# Codes the client makes up itself, for failures that never reached the API's error envelope.
UNREACHABLE = "UNREACHABLE"  # no HTTP answer at all (connection refused, DNS, timeout)
BAD_RESPONSE = "BAD_RESPONSE"  # an answer that is not the API's JSON (a proxy page, a truncated body)
MISSING_SCOPE = "INVALID_PARAMETERS"  # no database given and no default set: the API's own code for it


class CtxstoreError(Exception):
    """A failed call. Branch on `code` (the API's `error.code`, e.g. `DATABASE_NOT_FOUND`); tolerate new codes.

    `status` is the HTTP status (None when no answer came back), `request_id` the server's id for the
    request (quote it in support requests), `retry_after` the seconds the server asked to wait (429/503).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """True for a refusal the server made before doing any work (429 rate limit, 503 overload/unavailable)."""
        return self.status in (429, 503)

    def __repr__(self) -> str:
        return f"CtxstoreError(code={self.code!r}, status={self.status!r}, message={self.message!r})"
