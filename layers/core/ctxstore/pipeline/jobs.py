"""The queues this service runs and their handlers."""

from __future__ import annotations

from ctxstore.pipeline.ingest_pipeline import IngestPipeline
from ctxstore.pipeline.local_runner import QueueSpec
from ctxstore.pipeline.retry_policy import RetryPolicy, TransientError
from ctxstore.ports.work_queue import Job
from ctxstore.ports.workflow import INGEST_QUEUE
from ctxstore.services.connectors import SYNC_QUEUE, ConnectorService
from ctxstore.services.container import Options
from ctxstore.services.databases import PROVISION_QUEUE
from ctxstore.services.registry import Services
from ctxstore.services.webhooks import WEBHOOK_QUEUE, WebhookService

# The same numbers as the Retry blocks of statemachines/ingest.asl.json (the E6001 path); tests/aws checks it.
# max_attempts counts attempts; the ASL's MaxAttempts counts retries (max_attempts - 1).
INGEST_RETRY = RetryPolicy(max_attempts=6, interval_s=1.0, backoff_rate=2.0, max_delay_s=30.0)


def webhook_retry(o: Options) -> RetryPolicy:
    """Exponential backoff with full jitter between delivery attempts, bounded by webhook_max_attempts."""
    return RetryPolicy(
        max_attempts=max(1, o.webhook_max_attempts),
        interval_s=o.webhook_retry_interval_s,
        backoff_rate=2.0,
        max_delay_s=o.webhook_retry_max_delay_s,
    )


def webhook_spec(webhooks: WebhookService, o: Options) -> QueueSpec:
    def deliver(job: Job) -> None:
        result = webhooks.deliver(job)
        if result is not None and result.retry:
            raise TransientError(result.error_message, code=result.error_code)

    return QueueSpec(
        WEBHOOK_QUEUE,
        deliver,
        webhook_retry(o),
        lease_s=max(60.0, 3 * o.webhook_timeout_s),
        on_failure=webhooks.give_up,
    )


def connector_spec(connectors: ConnectorService) -> QueueSpec:
    """Sync chunks (services/connectors): the service turns provider errors into connector state, so only
    storage trouble reaches the runner's retry path. Its lease outlives the longest chunk."""

    def run(job: Job) -> None:
        connectors.run_job(job)

    return QueueSpec(SYNC_QUEUE, run, INGEST_RETRY, lease_s=connectors.limits.lease_s)


def ingest_pipeline(svc: Services) -> IngestPipeline:
    """The ingestion pipeline both runners drive: the local queue (queue_specs) and Step Functions (ingest_steps)."""
    graph_step = svc.graphs.graph_step if svc.graphs is not None else None
    return IngestPipeline(svc.container, svc.items, graph_step=graph_step)


def queue_specs(svc: Services, *, ingest_retry: RetryPolicy = INGEST_RETRY) -> list[QueueSpec]:
    """Every queue but connector syncs, which run on their own runner (`serve`) or function (AWS), so a long
    sync chunk never holds a worker that ingestion needs."""

    def provision(job: Job) -> None:
        svc.databases.provision(job.org, str(job.payload["database"]))

    specs = [QueueSpec(PROVISION_QUEUE, provision, lease_s=60)]
    pipeline = ingest_pipeline(svc)
    specs.append(QueueSpec(INGEST_QUEUE, pipeline.handle, ingest_retry, lease_s=600, on_failure=pipeline.on_give_up))
    if svc.webhooks is not None:
        specs.append(webhook_spec(svc.webhooks, svc.container.options))
    return specs
