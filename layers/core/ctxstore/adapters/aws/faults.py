"""Which AWS faults are worth retrying: throttling, 5xx and network faults become StoreUnavailable (E6001).

botocore's standard retry mode already retries these a few times with backoff inside one call. When a
call still fails, the fault is temporary for the caller too: the API answers 503 with Retry-After and a
pipeline step is retried by its Step Functions Retry (or the local runner). Everything else (validation,
access denied, missing resources, failed conditions) keeps its ClientError, so an adapter still reads
the codes it understands and a real bug still surfaces as one.

``install(client)`` applies this to every operation of one boto3 client through botocore's event hooks,
so no call site can forget it: ``after-call`` sees the final error response (after botocore's retries),
``after-call-error`` the network exception (connection refused, connect/read timeout, connection reset).

Codes, per the services' error references: DynamoDB ``ThrottlingException``,
``ProvisionedThroughputExceededException``, ``RequestLimitExceeded``, ``InternalServerError``,
``TransactionConflictException`` (an item is held by a transaction), ``LimitExceededException`` (too
many concurrent control-plane requests) and a ``TransactionCanceledException`` whose reasons are
throttling or a conflict; S3 ``SlowDown`` (503), ``InternalError``, ``ServiceUnavailable``,
``RequestTimeout`` (400: the socket was idle too long); SQS ``RequestThrottled`` /
``ThrottlingException``, ``OverLimit`` (the in-flight quota); KMS ``ThrottlingException``,
``KMSInternalException``, ``DependencyTimeoutException``, ``KeyUnavailableException``; Step Functions
and EventBridge Scheduler ``ThrottlingException``, ``InternalServerException``. Any 429 and any 5xx
but 501 (not implemented) is transient whatever its code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from ctxstore.domain.errors import StoreUnavailable

THROTTLING = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "SlowDown",
        "OverLimit",
    }
)
TRANSIENT = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "InternalServerException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "TransactionInProgressException",
        "TransactionConflictException",
        "KMSInternalException",
        "DependencyTimeoutException",
        "KeyUnavailableException",
    }
)
# Codes whose meaning depends on the service: DynamoDB's LimitExceededException is a request-rate limit
# on control-plane calls, KMS's is a resource quota (not transient).
BY_SERVICE: dict[str, frozenset[str]] = {"dynamodb": frozenset({"LimitExceededException"})}
# DynamoDB CancellationReasons codes that a retry can clear.
TRANSACTION_RETRYABLE = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict", "RequestLimitExceeded"}
)
THROTTLED_RETRY_AFTER_S = 2
_UNIQUE = "ctxstore-faults"


def transient_response(parsed: dict[str, Any], status: int, *, service: str = "", extra: Iterable[str] = ()) -> bool:
    """Whether an error answer (parsed body and HTTP status) is worth retrying later."""
    code = str(parsed.get("Error", {}).get("Code", ""))
    if code == "TransactionCanceledException":
        reasons = {str(r.get("Code", "")) for r in parsed.get("CancellationReasons") or []}
        return bool(reasons & TRANSACTION_RETRYABLE) and "ConditionalCheckFailed" not in reasons
    if code in THROTTLING or code in TRANSIENT or code in BY_SERVICE.get(service, ()) or code in extra:
        return True
    return status == 429 or (status >= 500 and status != 501)


def transient(exc: BaseException, *, service: str = "", extra: Iterable[str] = ()) -> bool:
    """Whether a botocore exception is a throttle, a service fault or a network fault."""
    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        return transient_response(dict(exc.response), status, service=service, extra=extra)
    # Connection refused/reset, DNS, connect and read timeouts, a body cut short while streaming.
    return isinstance(exc, (BotoConnectionError, HTTPClientError))


def unavailable(service: str, operation: str, exc: BaseException) -> StoreUnavailable:
    code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else type(exc).__name__
    wait = THROTTLED_RETRY_AFTER_S if code in THROTTLING else 1
    return StoreUnavailable(f"{service} {operation} unavailable ({code}); retry with backoff", retry_after_s=wait)


def install(client: Any, *, extra: Iterable[str] = ()) -> Any:
    """Make every call of ``client`` raise StoreUnavailable for a transient fault; returns the client.

    Idempotent per client (a client shared by two adapters gets the hooks once).
    """
    events = client.meta.events
    service = client.meta.service_model.service_id.hyphenize()
    extra_codes = frozenset(extra)

    def after_call(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        status = int(getattr(http_response, "status_code", 0) or 0)
        if status >= 300 and transient_response(parsed, status, service=service, extra=extra_codes):
            error = ClientError(parsed, model.name)  # type: ignore[arg-type]
            raise unavailable(service, model.name, error) from error

    def after_call_error(exception: BaseException, event_name: str, **_: Any) -> None:
        if transient(exception, service=service):
            raise unavailable(service, event_name.rsplit(".", 1)[-1], exception) from exception

    events.register("after-call", after_call, unique_id=f"{_UNIQUE}-after-call")
    events.register("after-call-error", after_call_error, unique_id=f"{_UNIQUE}-after-call-error")
    return client
