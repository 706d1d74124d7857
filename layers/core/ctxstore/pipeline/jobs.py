"""The queues this service runs and their handlers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxstore.config import Settings, WebhookSettings
from ctxstore.domain.items import ItemRef
from ctxstore.pipeline.graph_batches import GraphBatches
from ctxstore.pipeline.index_batches import IndexBatches
from ctxstore.pipeline.ingest_pipeline import IngestPipeline
from ctxstore.pipeline.local_runner import QueueSpec
from ctxstore.pipeline.retry_policy import RetryPolicy, TransientError
from ctxstore.ports.work_queue import Job
from ctxstore.ports.workflow import INGEST_QUEUE, WorkflowStarter
from ctxstore.services import record_kinds as rk
from ctxstore.services.connectors import SYNC_QUEUE, ConnectorService
from ctxstore.services.container import Capabilities
from ctxstore.services.databases import PROVISION_QUEUE
from ctxstore.services.registry import Services
from ctxstore.services.webhooks.rules import WEBHOOK_QUEUE
from ctxstore.services.webhooks.service import WebhookService

# The same numbers as the Retry blocks of statemachines/ingest.asl.json (the E6001 path); tests/aws checks it.
# max_attempts counts attempts; the ASL's MaxAttempts counts retries (max_attempts - 1).
INGEST_RETRY = RetryPolicy(max_attempts=6, interval_s=1.0, backoff_rate=2.0, max_delay_s=30.0)
# The graph step of an indexed item (relations, graph writes, completed): a background queue, run only
# when no index job waits and by one thread fewer than the runner has, so items become searchable at
# the embedder's pace and a new item never waits behind extraction. (A thread of its own, running during
# indexing, was tried in issue 28 and removed: searchable looked slower, and on 2 cores extraction and
# embedding together are bound by the CPU whatever the schedule, docs/benchmarks.md.)
GRAPH_QUEUE = "graph"
# Index jobs a worker claims at once when many wait: they share one lock, index and status write, and their
# chunks are embedded in calls of up to FLUSH_CHUNKS (pipeline/index_batches.py); a single ingest is still claimed
# and published alone. Larger claims run the model back to back more (SciFact in process with two workers: 17.2-18.1
# CPU-ms an item with 8, 16.3-17.4 with 16, 16.1-16.8 with 24), but on 2 cores both ingest phases are bound by the
# CPU, so the faster the items become searchable, the larger the graph step's share of the time to completed: whole
# SciFact completed / searchable 1.477-1.504 with 16 (two of five runs over issue 28's 1.5), 1.489-1.515 with 24,
# 1.486-1.487 with 8 (docs/benchmarks.md). 8 until the graph step itself is cheaper.
INDEX_BATCH = 8
# Graph jobs a worker claims at once: they share the extraction calls and the graph and status writes
# (pipeline/graph_batches.py), which is what lets the graph step keep pace with indexing (issue 28). Parts of 64
# items, two in flight, so the two extraction processes get slices of ~32 texts back to back; but at the end of a
# batch only its last part is left, and the processes wait for the slower slice, the writes and the next claim:
# with 256 they were idle 8-9 % of the graph tail (timestamps of every slice, whole SciFact), with 1,024 3-5 %, and
# the tail took 26.1-27.5 s against 26.1-28.6 (three alternated runs each: completed / searchable 1.434-1.45
# against 1.466-1.484). That holds for the local extraction pool (~5 ms a text); rules in the worker threads keep 256.
GRAPH_BATCH = 256
GRAPH_BATCH_LOCAL_POOL = 1024
# An extractor that calls a model per text (llm, bedrock) makes its calls one after the other, each allowed a 60 s
# timeout: a batch must end within the graph jobs' 600 s lease (nothing renews it), or another worker claims the same
# jobs again. 256 items at ~2 s a call took ~9 minutes at best; 8 one-chunk items end within the lease even if every
# call waits out its timeout, and the model's time dwarfs what a larger batch shares (writes, one claim).
GRAPH_BATCH_MODEL = 8
# While items are being indexed a graph batch holds one of the two workers, so the embedding has one core until it
# ends: a short one (16 jobs, ~0.3 s of extraction) so indexing gets its core back between graph batches.
GRAPH_BATCH_WHILE_INDEXING = 16


def graph_batch(settings: Settings, capabilities: Capabilities) -> int:
    """Graph jobs claimed at once once indexing is done: more where the local extraction pool answers them (only
    one `serve` process runs one: runtime/common_ports.py build_extractor)."""
    extraction = settings.extraction
    if extraction.extractor in ("llm", "bedrock"):
        return GRAPH_BATCH_MODEL
    pool = extraction.extractor == "rules" and extraction.extractor_processes > 0 and capabilities.single_process
    return GRAPH_BATCH_LOCAL_POOL if pool else GRAPH_BATCH


def webhook_retry(o: WebhookSettings) -> RetryPolicy:
    """Exponential backoff with full jitter between delivery attempts, bounded by CTXSTORE_WEBHOOK_MAX_ATTEMPTS."""
    return RetryPolicy(
        max_attempts=max(1, o.max_attempts),
        interval_s=o.retry_interval_s,
        backoff_rate=2.0,
        max_delay_s=o.retry_max_delay_s,
    )


def webhook_spec(webhooks: WebhookService) -> QueueSpec:
    o = webhooks.settings

    def deliver(job: Job) -> None:
        result = webhooks.deliver(job)
        if result is not None and result.retry:
            raise TransientError(result.error_message, code=result.error_code)

    return QueueSpec(
        WEBHOOK_QUEUE,
        deliver,
        webhook_retry(o),
        lease_s=max(60.0, 3 * o.timeout_s),
        on_failure=webhooks.give_up,
    )


def connector_spec(connectors: ConnectorService) -> QueueSpec:
    """Sync chunks (services/connectors): the service turns provider errors into connector state, so only
    storage trouble reaches the runner's retry path. Its lease outlives the longest chunk."""

    def run(job: Job) -> None:
        connectors.run_job(job)

    return QueueSpec(SYNC_QUEUE, run, INGEST_RETRY, lease_s=connectors.limits.lease_s)


def ingest_pipeline(svc: Services, *, graph_jobs: WorkflowStarter | None = None) -> IngestPipeline:
    """The ingestion pipeline both runners drive: the local queue (queue_specs) and Step Functions (ingest_steps).

    With `graph_jobs` the index job ends at searchable and starts the item's graph job there."""
    graph_step = svc.graphs.graph_step if svc.graphs is not None else None

    def queue_graph(org: str, items: Sequence[tuple[ItemRef, str]]) -> None:
        assert graph_jobs is not None
        starts = [
            (f"graph{rk.SEP}{ref.pk}{rk.SEP}{ref.item_id}{rk.SEP}{version}", {"ref": ref.to_json(), "version": version})
            for ref, version in items
        ]
        graph_jobs.start_many(org, starts)

    c = svc.container
    return IngestPipeline(
        svc.items,
        blobs=lambda: c.blobs,
        search_index=lambda: c.search_index,
        embedder=lambda: c.embedder,
        inferrer=lambda: c.inferrer,
        graph_step=graph_step,
        queue_graph=queue_graph if graph_jobs is not None else None,
    )


class _GraphJobs:
    def __init__(self, svc: Services) -> None:
        self._queue = svc.container.queue

    def start(self, org: str, execution_name: str, payload: dict[str, Any]) -> bool:
        return self._queue.enqueue(org, GRAPH_QUEUE, execution_name, payload)

    def start_many(self, org: str, starts: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        return self._queue.enqueue_many(org, GRAPH_QUEUE, starts)


def queue_specs(svc: Services, *, ingest_retry: RetryPolicy = INGEST_RETRY, threads: int = 2) -> list[QueueSpec]:
    """Every queue but connector syncs, which run on their own runner (`serve`) or function (AWS), so a long
    sync chunk never holds a worker that ingestion needs."""

    def provision(job: Job) -> None:
        svc.databases.provision(job.org, str(job.payload["database"]))

    specs = [QueueSpec(PROVISION_QUEUE, provision, lease_s=60)]
    pipeline = ingest_pipeline(svc, graph_jobs=_GraphJobs(svc))
    specs.append(
        QueueSpec(
            INGEST_QUEUE,
            pipeline.handle,
            ingest_retry,
            lease_s=600,
            on_failure=pipeline.on_give_up,
            batch_handler=IndexBatches(pipeline).handle,
            batch=INDEX_BATCH,
        )
    )
    if svc.webhooks is not None:
        specs.append(webhook_spec(svc.webhooks))
    specs.append(
        QueueSpec(
            GRAPH_QUEUE,
            pipeline.handle_graph,
            ingest_retry,
            lease_s=600,
            on_failure=pipeline.on_give_up,
            background=True,
            max_running=max(1, threads - 1),
            batch_handler=GraphBatches(pipeline, svc.items, svc.graphs).handle if svc.graphs is not None else None,
            batch=graph_batch(svc.container.settings, svc.container.capabilities),
            batch_while_busy=GRAPH_BATCH_WHILE_INDEXING,
        )
    )
    return specs
