"""Lambda that runs queued jobs (JobsTable): woken by the table's stream on insert and by a 1-minute schedule.

It drives the same queue specs and retry policy as the local server's runner, one job at a time, until
the queue is empty or too little of the invocation's time is left to finish another job.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from ctxstore.bootstrap import build_aws
from ctxstore.config import Settings
from ctxstore.pipeline.jobs import queue_specs
from ctxstore.pipeline.local_runner import LocalRunner, QueueSpec
from ctxstore.ports.work_queue import Job
from ctxstore.services.registry import build_services

logger = Logger()
tracer = Tracer()
metrics = Metrics()

container = build_aws(Settings())


def _counting(spec: QueueSpec) -> QueueSpec:
    """Count every job given up on, so the DeadJobsAlarm fires on the dead-letter set."""

    def on_failure(job: Job, error: str) -> None:
        metrics.add_metric(name="JobsDeadLettered", unit=MetricUnit.Count, value=1)
        logger.error("job dead-lettered", extra={"queue": job.queue, "job_id": job.job_id, "error": error})
        if spec.on_failure is not None:
            spec.on_failure(job, error)

    return dataclasses.replace(spec, on_failure=on_failure)


runner = LocalRunner(container.queue, [_counting(s) for s in queue_specs(build_services(container))], threads=1)
RESERVE_MS = 70_000  # the longest lease (60 s) plus a margin: never start a job that cannot finish


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    ran = 0
    while context.get_remaining_time_in_millis() > RESERVE_MS and runner.run_once():
        ran += 1
    metrics.add_metric(name="JobsRun", unit=MetricUnit.Count, value=ran)
    return {"ran": ran}
