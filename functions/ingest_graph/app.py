"""Step Functions task Graph: the item's graph step (graph_payload or extraction); relations created."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from ctxstore.bootstrap import build_aws
from ctxstore.config import Settings
from ctxstore.pipeline.ingest_steps import ingest_steps
from ctxstore.services.registry import build_services

logger = Logger()
tracer = Tracer()
metrics = Metrics()

# Built once per cold start (clients only, no network calls) and reused by every invocation.
container = build_aws(Settings())
steps = ingest_steps(build_services(container))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return steps.graph(event)
