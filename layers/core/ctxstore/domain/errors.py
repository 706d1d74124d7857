"""Error codes of the interface and the one exception type services raise."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    INVALID_PARAMETERS = "INVALID_PARAMETERS"
    INVALID_INPUT = "INVALID_INPUT"
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    DATABASE_NOT_FOUND = "DATABASE_NOT_FOUND"
    SOURCE_NOT_FOUND = "SOURCE_NOT_FOUND"
    FILE_NOT_FOUND = "FILE_NOT_FOUND"
    DATABASE_ALREADY_EXISTS = "DATABASE_ALREADY_EXISTS"
    CONFLICT = "CONFLICT"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    RATE_LIMITED = "RATE_LIMITED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"
    PROVIDER_UNAVAILABLE = "PROVIDER_UNAVAILABLE"  # a connector's provider could not answer (502)


# The HTTP status each code travels with unless a caller says otherwise.
DEFAULT_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_PARAMETERS: 400,
    ErrorCode.INVALID_INPUT: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.DATABASE_NOT_FOUND: 404,
    ErrorCode.SOURCE_NOT_FOUND: 404,
    ErrorCode.FILE_NOT_FOUND: 404,
    ErrorCode.DATABASE_ALREADY_EXISTS: 409,
    ErrorCode.CONFLICT: 409,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.VALIDATION_ERROR: 422,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INTERNAL_ERROR: 500,
    ErrorCode.SERVICE_UNAVAILABLE: 503,
    ErrorCode.PROVIDER_UNAVAILABLE: 502,
}


class ApiError(Exception):
    """A failure the client should see, with the interface's code and a message naming the cause."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status if status is not None else DEFAULT_STATUS[code]
        self.headers = headers or {}
        self.extra = extra or {}


def invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_PARAMETERS, message)


def database_not_found(database: str) -> ApiError:
    return ApiError(ErrorCode.DATABASE_NOT_FOUND, f"Database '{database}' not found")


class StoreUnavailable(Exception):
    """A storage dependency is temporarily unavailable (locked, throttled, down, out of space): retry later."""

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


OUT_OF_SPACE_RETRY_AFTER_S = 30  # space comes back when an operator frees it: minutes, not milliseconds
