"""The background functions: the ingestion tasks of the state machine, the job worker, webhook deliveries on
SQS and connector syncs. Each runs the same pipeline and queue specs as `ctxstore serve`'s runners."""

from __future__ import annotations

import dataclasses
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from ctxstore.config import Settings
from ctxstore.pipeline.local_runner import LocalRunner, QueueSpec
from ctxstore.ports.work_queue import Job
from ctxstore.runtime.aws import build_aws
from ctxstore.runtime.lambda_entry import LambdaEntry
from ctxstore.runtime.lambda_observability import logger, metrics, observed
from ctxstore.services.registry import Services

JOB_RESERVE_MS = 70_000  # the longest job lease (60 s) plus a margin: never start a job that cannot finish


def ingest_step_handler(step: str) -> LambdaEntry:
    """A Step Functions task (parse, embed, index, graph, complete, errored) of one item version."""
    from ctxstore.pipeline.ingest_steps import ingest_steps

    settings = Settings()
    services = Services(build_aws(settings))
    run = getattr(ingest_steps(services), step)

    def handle(event: dict[str, Any], context: Any) -> Any:
        return run(event)

    return LambdaEntry(observed(handle, http=False, trace=settings.aws.trace_aws_calls), services)


class StarterEntry(LambdaEntry):
    """The ingest starter's handler, with the BoundedStarts it runs (tests tune its polling)."""

    def __init__(self, fn: Any, services: Services, starts: Any) -> None:
        super().__init__(fn, services)
        self.starts = starts


def ingest_starter_handler() -> LambdaEntry:
    """Batches of the ingest start queue: starts executions while fewer than CTXSTORE_INGEST_MAX_RUNNING run;
    what cannot start within the invocation is reported in batchItemFailures (adapters/aws/ingest_starts.py)."""
    from ctxstore.runtime.aws import bounded_starts

    settings = Settings()
    services = Services(build_aws(settings))
    starts = bounded_starts(settings, services.container.records)

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        result: dict[str, Any] = starts.run(event["Records"], context.get_remaining_time_in_millis() / 1000)
        metrics.add_metric(name="IngestStartsDeferred", unit=MetricUnit.Count, value=len(result["batchItemFailures"]))
        return result

    return StarterEntry(observed(handle, http=False, trace=settings.aws.trace_aws_calls), services, starts)


def _dead_lettered(spec: QueueSpec, what: str) -> QueueSpec:
    """Count every job given up on (the DeadJobsAlarm watches the metric), then run the spec's own handling."""

    def on_failure(job: Job, error: str) -> None:
        metrics.add_metric(name="JobsDeadLettered", unit=MetricUnit.Count, value=1)
        logger.error(what, extra={"queue": job.queue, "job_id": job.job_id, "error": error})
        if spec.on_failure is not None:
            spec.on_failure(job, error)

    return dataclasses.replace(spec, on_failure=on_failure)


def job_worker_handler() -> LambdaEntry:
    """Woken by the jobs table's stream and a 1-minute schedule: runs due jobs while a whole job still fits."""
    from ctxstore.pipeline.jobs import queue_specs

    settings = Settings()
    services = Services(build_aws(settings))
    specs = [_dead_lettered(s, "job dead-lettered") for s in queue_specs(services)]
    runner = LocalRunner(services.container.queue, specs, threads=1)

    def handle(event: dict[str, Any], context: Any) -> dict[str, int]:
        ran = 0
        while context.get_remaining_time_in_millis() > JOB_RESERVE_MS and runner.run_once():
            ran += 1
        metrics.add_metric(name="JobsRun", unit=MetricUnit.Count, value=ran)
        return {"ran": ran}

    return LambdaEntry(observed(handle, http=False, trace=settings.aws.trace_aws_calls), services)


def webhook_dispatch_handler() -> LambdaEntry:
    """Webhook deliveries from SQS with partial-batch failures: a delivery to retry stays, invisible for its backoff."""
    from ctxstore.pipeline.jobs import webhook_spec
    from ctxstore.pipeline.sqs_batch import run_batch

    settings = Settings()
    services = Services(build_aws(settings))
    spec = _dead_lettered(webhook_spec(services.webhooks), "webhook delivery given up")
    runner = LocalRunner(services.container.queue, [spec], threads=1)

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        result = run_batch(runner, {spec.name: spec}, event)
        metrics.add_metric(name="WebhookRetries", unit=MetricUnit.Count, value=len(result["batchItemFailures"]))
        return result

    return LambdaEntry(observed(handle, http=False, trace=settings.aws.trace_aws_calls), services)


def connector_sync_handler() -> LambdaEntry:
    """Connector syncs: a schedule event queues its connector's sync, then queued chunks run while one fits.

    Woken too by the jobs table's stream (a manual or configure-triggered sync) and by a 1-minute sweep. A
    schedule event is `{"schedule": {"org", "payload": {"connector_id"}, ...}}`; its job id is the connector id,
    so one connector never syncs twice at once.
    """
    from ctxstore.pipeline.jobs import connector_spec

    settings = Settings()
    services = Services(build_aws(settings))
    connectors = services.connectors
    assert connectors is not None
    runner = LocalRunner(services.container.queue, [connector_spec(connectors)], threads=1)
    # Never start a chunk that cannot finish: its time budget, the longest provider wait, a margin.
    reserve_ms = int((settings.connectors.chunk_seconds + settings.connectors.max_wait_s + 60) * 1000)

    def handle(event: dict[str, Any], context: Any) -> dict[str, int]:
        queued = 0
        schedule = event.get("schedule")
        if isinstance(schedule, dict):
            connector_id = str((schedule.get("payload") or {}).get("connector_id") or schedule.get("schedule_id"))
            every_s = int(schedule.get("every_s") or 3600)
            queued = int(connectors.scheduling.on_schedule(str(schedule["org"]), connector_id, every_s))
        ran = 0
        while context.get_remaining_time_in_millis() > reserve_ms and runner.run_once():
            ran += 1
        metrics.add_metric(name="ConnectorChunksRun", unit=MetricUnit.Count, value=ran)
        return {"queued": queued, "ran": ran}

    return LambdaEntry(observed(handle, http=False, trace=settings.aws.trace_aws_calls), services)
