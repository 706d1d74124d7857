"""Lambda entry point for /connectors*, /connector-discovery and /connector-catalog: the connectors router only."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum

from ctxstore.bootstrap import build_aws
from ctxstore.config import Settings
from ctxstore.http.factory import create_app
from ctxstore.http.routers import connectors
from ctxstore.services.registry import build_services

logger = Logger()
tracer = Tracer()
metrics = Metrics()

# Built once per cold start (clients only, no network calls) and reused by every invocation.
container = build_aws(Settings())
asgi = Mangum(create_app(build_services(container), [connectors.router]), lifespan="off")


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return asgi(event, context)  # type: ignore[arg-type]
