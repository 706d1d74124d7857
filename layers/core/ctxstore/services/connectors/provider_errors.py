"""How a provider's error met while answering a request reads in the API's envelope."""

from __future__ import annotations

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.ports.connector_provider import (
    CredentialsRejected,
    ProviderError,
    RateLimited,
    RefreshRejected,
    ResourceUnavailable,
    TokenExpired,
)


def provider_failure(provider: str, exc: ProviderError) -> ApiError:
    """A provider error met while answering a request (create, discover, configure probes, PATCH)."""
    if isinstance(exc, CredentialsRejected | TokenExpired | RefreshRejected):
        return ApiError(ErrorCode.INVALID_INPUT, f"{provider} rejected the credentials: {exc}")
    if isinstance(exc, ResourceUnavailable):
        return ApiError(ErrorCode.INVALID_INPUT, f"{provider}: {exc}")
    headers = {"Retry-After": str(max(1, int(exc.retry_after_s)))} if isinstance(exc, RateLimited) else {}
    return ApiError(ErrorCode.PROVIDER_UNAVAILABLE, f"{provider} could not answer: {exc}", headers=headers)
