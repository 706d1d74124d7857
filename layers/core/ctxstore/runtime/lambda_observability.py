"""Powertools around every Lambda handler: JSON logs with the request's correlation id, X-Ray, EMF metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths

logger = Logger()
tracer = Tracer()
metrics = Metrics()

Handler = Callable[[dict[str, Any], Any], Any]


def observed(fn: Handler, *, http: bool) -> Handler:
    """`fn` with the request logged (correlated to API Gateway's request id for HTTP), traced and measured."""
    inject = (
        logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
        if http
        else logger.inject_lambda_context
    )
    wrapped = tracer.capture_lambda_handler(fn)
    wrapped = metrics.log_metrics(capture_cold_start_metric=http)(wrapped)
    return inject(wrapped)  # type: ignore[no-any-return]
