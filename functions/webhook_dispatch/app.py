"""Lambda for webhook deliveries on SQS (WebhookQueue), with partial-batch failure reporting.

Each message is one delivery attempt run through the same webhook queue spec and retry policy as the
local runner. A delivery to try again stays on the queue, invisible for its backoff delay, and is
listed in `batchItemFailures`; the rest of the batch is deleted by Lambda.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from ctxstore.bootstrap import build_aws
from ctxstore.config import Settings
from ctxstore.pipeline.jobs import webhook_spec
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.pipeline.sqs_batch import run_batch
from ctxstore.ports.work_queue import Job
from ctxstore.services.registry import build_services

logger = Logger()
tracer = Tracer()
metrics = Metrics()

container = build_aws(Settings())
services = build_services(container)
assert services.webhooks is not None
_spec = webhook_spec(services.webhooks, container.options)


def _given_up(job: Job, error: str) -> None:
    metrics.add_metric(name="JobsDeadLettered", unit=MetricUnit.Count, value=1)
    logger.error("webhook delivery given up", extra={"job_id": job.job_id, "error": error})
    if _spec.on_failure is not None:
        _spec.on_failure(job, error)


spec = dataclasses.replace(_spec, on_failure=_given_up)
runner = LocalRunner(container.queue, [spec], threads=1)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    result = run_batch(runner, {spec.name: spec}, event)
    metrics.add_metric(name="WebhookRetries", unit=MetricUnit.Count, value=len(result["batchItemFailures"]))
    return result
