"""Powertools around every Lambda handler: JSON logs with the request's correlation id, EMF metrics, and on
request (CTXSTORE_TRACE_AWS_CALLS=true, the template's TraceAwsCalls) X-Ray subsegments per AWS call.

The Tracer is opt-in because it imports the X-Ray SDK in every cold start (about 0.15 s on this machine, a
fifth of an API function's budget); `Tracing: Active` in the template traces each invocation without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.logging import Logger, correlation_paths
from aws_lambda_powertools.metrics import Metrics

logger = Logger()
metrics = Metrics()

Handler = Callable[[dict[str, Any], Any], Any]


def observed(fn: Handler, *, http: bool, trace: bool = False) -> Handler:
    """`fn` with the request logged (correlated to API Gateway's request id for HTTP), measured, and traced
    per AWS call when asked."""
    inject = (
        logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
        if http
        else logger.inject_lambda_context
    )
    wrapped = fn
    if trace:
        from aws_lambda_powertools.tracing import Tracer

        wrapped = Tracer().capture_lambda_handler(wrapped)
    wrapped = metrics.log_metrics(capture_cold_start_metric=http)(wrapped)
    return inject(wrapped)  # type: ignore[no-any-return]
