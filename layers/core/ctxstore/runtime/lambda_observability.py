"""Powertools around every Lambda handler: JSON logs with the request's correlation id, EMF metrics, and on
request (CTXSTORE_TRACE_AWS_CALLS=true, the template's TraceAwsCalls) X-Ray subsegments per AWS call.

The measurements `ctxstore serve` exposes at /metrics (ctxstore/observability) are metrics of the invocation's
EMF line here, one name per label value (`PipelineStep_embed`, `WebhookDelivery_delivered`), so one flush never
mixes dimensions. Requests are not: API Gateway's own per-route Count, Latency, 4XX and 5XX carry them.

The Tracer is opt-in because it imports the X-Ray SDK in every cold start (about 0.15 s on this machine, a
fifth of an API function's budget); `Tracing: Active` in the template traces each invocation without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.logging import Logger, correlation_paths
from aws_lambda_powertools.metrics import Metrics, MetricUnit

from ctxstore import observability as obs

logger = Logger()
metrics = Metrics()

METRIC_NAMES = {
    obs.ADMISSION_REFUSED: "AdmissionRefused",
    obs.PIPELINE_STEP: "PipelineStep",
    obs.QUERY_LANE: "QueryLane",
    obs.CONNECTOR_SYNC: "ConnectorSync",
    obs.CONNECTOR_RATE_LIMIT_WAIT: "ConnectorRateLimitWait",
    obs.WEBHOOK_DELIVERY: "WebhookDelivery",
}
TIMED = {obs.PIPELINE_STEP, obs.QUERY_LANE, obs.CONNECTOR_RATE_LIMIT_WAIT}


class PowertoolsSink:
    """The observability hooks on Lambda: each measurement a metric of this invocation (flushed by log_metrics)."""

    def observe(self, name: str, value: float, labels: Mapping[str, str]) -> None:
        base = METRIC_NAMES.get(name)
        if base is None:
            return  # requests: API Gateway's metrics
        metric = "_".join([base, *labels.values()])  # in the order the call names them
        metrics.add_metric(name=metric, unit=MetricUnit.Seconds if name in TIMED else MetricUnit.Count, value=value)


_sink: list[PowertoolsSink] = []


def install_sink() -> None:
    """Once per Lambda execution environment (never in a test process that merely imports a handler)."""
    if not _sink and os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        _sink.append(PowertoolsSink())
        obs.add_sink(_sink[0])


Handler = Callable[[dict[str, Any], Any], Any]


def observed(fn: Handler, *, http: bool, trace: bool = False) -> Handler:
    """`fn` with the request logged (correlated to API Gateway's request id for HTTP), measured, and traced
    per AWS call when asked."""
    install_sink()
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
