"""The AWS backend: DynamoDB records and jobs, S3 blobs, OpenSearch Serverless chunks, Bedrock models, Neptune
graphs, EventBridge schedules, KMS-sealed credentials (names from the CTXSTORE_* variables template.yaml sets).

Every port is a factory that runs the first time a service reads it: a Lambda function imports an adapter's
module and creates its boto3 client only if its handler uses it (the health check builds nothing, the query
function never imports a connector SDK). Building makes no network call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxstore.config import Settings
from ctxstore.ports.blobs import BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.credential_vault import CredentialVault
from ctxstore.ports.embedder import Embedder
from ctxstore.ports.extractor import Extractor
from ctxstore.ports.graph import GraphStore
from ctxstore.ports.records import RecordStore
from ctxstore.ports.reranker import Reranker
from ctxstore.ports.scheduler import Scheduler
from ctxstore.ports.search_index import SearchIndex
from ctxstore.ports.work_queue import WorkQueue
from ctxstore.ports.workflow import WorkflowStarter
from ctxstore.runtime.capabilities import capabilities_of
from ctxstore.runtime.common_ports import build_extractor, connector_providers, webhook_sender
from ctxstore.services.container import Container

if TYPE_CHECKING:
    from ctxstore.adapters.aws.ingest_starts import BoundedStarts


def build_aws(settings: Settings) -> Container:
    """A container whose ports are built on first use."""
    s = settings
    if (
        s.extraction.extractor == "bedrock" and not s.extraction.extractor_model_id
    ):  # a misconfiguration fails the cold start, not a task
        raise ValueError("CTXSTORE_EXTRACTOR=bedrock needs CTXSTORE_EXTRACTOR_MODEL_ID")
    factories: dict[str, Callable[[], Any]] = {
        "records": lambda: _records(s),
        "blobs": lambda: _blobs(s),
        "queue": lambda: _queue(s),
        "clock": _clock,
        "connector_providers": lambda: connector_providers(s),
    }
    c = Container(settings=s, capabilities=capabilities_of(s), factories=factories)
    # http_sender needs the container (its closer); webhook deliveries run in the job worker on AWS too.
    c.defer("http_sender", lambda: webhook_sender(c))
    optional: dict[str, tuple[bool, Callable[[], Any]]] = {
        "workflow": (bool(s.aws.ingest_start_queue_url or s.aws.state_machine_arn), lambda: build_aws_workflow(s)),
        "vault": (bool(s.connectors.kms_key_id), lambda: _vault(s)),
        "embedder": (bool(s.embedding.model_id), lambda: _embedder(s)),
        "search_index": (bool(s.aws.search_endpoint), lambda: _search_index(s)),
        "scheduler": (bool(s.aws.scheduler_group), lambda: _scheduler(s)),
        "graph": (bool(s.aws.graph_id), lambda: _graph(s)),
        # The default "rules" (spaCy) is local-only: no extraction on AWS unless Bedrock is chosen.
        "extractor": (s.extraction.extractor == "bedrock", lambda: _extractor(s)),
        "reranker": (bool(s.rerank.model), lambda: _reranker(s)),
    }
    for name, (configured, factory) in optional.items():
        if configured:
            c.defer(name, factory)
    return c


def _records(s: Settings) -> RecordStore:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore

    return DynamoDbRecordStore(s.aws.records_table)


def _blobs(s: Settings) -> BlobStore:
    from ctxstore.adapters.aws.s3_blobs import S3BlobStore

    return S3BlobStore(s.aws.blob_bucket, sse=s.aws.blob_sse, kms_key_id=s.aws.blob_kms_key_id or None)


def _queue(s: Settings) -> WorkQueue:
    from ctxstore.adapters.aws.dynamodb_queue import DynamoDbWorkQueue

    queue: WorkQueue = DynamoDbWorkQueue(s.aws.jobs_table)
    if s.aws.webhook_queue_url:  # deliveries fan out on SQS (functions/webhook_dispatch), the rest stays
        from ctxstore.adapters.aws.sqs_queue import SqsRoutedWorkQueue
        from ctxstore.services.webhooks.rules import WEBHOOK_QUEUE

        queue = SqsRoutedWorkQueue(queue, {WEBHOOK_QUEUE: s.aws.webhook_queue_url})
    return queue


def _clock() -> Clock:
    from ctxstore.adapters.system.system_clock import SystemClock  # stdlib only; shared by both backends

    return SystemClock()


def build_aws_workflow(s: Settings) -> WorkflowStarter | None:
    """Ingestion's starter: the bounded start queue once CTXSTORE_INGEST_START_QUEUE_URL is set (the template
    sets it; functions/ingest_starter starts the executions), else Step Functions directly once
    CTXSTORE_STATE_MACHINE_ARN is set."""
    if s.aws.ingest_start_queue_url:
        from ctxstore.adapters.aws.ingest_starts import SqsWorkflowStarter

        return SqsWorkflowStarter(s.aws.ingest_start_queue_url)
    if not s.aws.state_machine_arn:
        return None
    from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter

    return SfnWorkflowStarter(s.aws.state_machine_arn)


def bounded_starts(s: Settings, records: RecordStore) -> BoundedStarts:
    """functions/ingest_starter: starts queued ingestions while fewer than CTXSTORE_INGEST_MAX_RUNNING run."""
    from ctxstore.adapters.aws._common import client
    from ctxstore.adapters.aws.faults import install
    from ctxstore.adapters.aws.ingest_starts import BoundedStarts, ExecutionSlots
    from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter

    sfn = SfnWorkflowStarter(s.aws.state_machine_arn)
    slots = ExecutionSlots(records, sfn.status, s.aws.ingest_max_running)
    return BoundedStarts(sfn=sfn, slots=slots, sqs=install(client("sqs")), queue_url=s.aws.ingest_start_queue_url)


def _vault(s: Settings) -> CredentialVault:
    from ctxstore.adapters.aws.kms_vault import KmsVault

    return KmsVault(s.connectors.kms_key_id)


def _embedder(s: Settings) -> Embedder:
    from ctxstore.adapters.aws.bedrock_embedder import BedrockEmbedder

    return BedrockEmbedder(s.embedding.model_id, dimensions=s.embedding.dimensions)


def _search_index(s: Settings) -> SearchIndex:
    from ctxstore.adapters.aws.opensearch_index import OpenSearchIndex, opensearch_client

    return OpenSearchIndex(
        opensearch_client(s.aws.search_endpoint, s.aws.search_region or None),
        dimension=s.embedding.dimensions,  # the index's knn_vector size = the embedder's output
        index=s.aws.search_index,
    )


def _scheduler(s: Settings) -> Scheduler:
    from ctxstore.adapters.aws.eventbridge_scheduler import EventBridgeScheduler

    return EventBridgeScheduler(
        s.aws.scheduler_group, target_arn=s.aws.scheduler_target_arn, role_arn=s.aws.scheduler_role_arn
    )


def _graph(s: Settings) -> GraphStore:
    from ctxstore.adapters.aws.neptune_graph import NeptuneGraphStore

    return NeptuneGraphStore(
        s.aws.graph_id,
        byog_graphs=s.byog.graph_ids,
        timeout_default_ms=s.byog.read_timeout_ms,
        timeout_max_ms=max(s.byog.read_timeout_ms, s.byog.write_timeout_ms),
    )


def _extractor(s: Settings) -> Extractor | None:
    return build_extractor(s)


def _reranker(s: Settings) -> Reranker:
    from ctxstore.adapters.aws.bedrock_reranker import BedrockReranker

    return BedrockReranker(s.rerank.model)
