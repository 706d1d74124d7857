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
from ctxstore.runtime.common_ports import build_extractor, connector_providers, webhook_sender
from ctxstore.runtime.options import options_from
from ctxstore.services.container import Container

if TYPE_CHECKING:
    from ctxstore.adapters.aws.ingest_starts import BoundedStarts


def build_aws(settings: Settings) -> Container:
    """A container whose ports are built on first use."""
    s = settings
    if s.extractor == "bedrock" and not s.extractor_model_id:  # a misconfiguration fails the cold start, not a task
        raise ValueError("CTXSTORE_EXTRACTOR=bedrock needs CTXSTORE_EXTRACTOR_MODEL_ID")
    factories: dict[str, Callable[[], Any]] = {
        "records": lambda: _records(s),
        "blobs": lambda: _blobs(s),
        "queue": lambda: _queue(s),
        "clock": _clock,
        "connector_providers": lambda: connector_providers(s),
    }
    c = Container(options=options_from(s), factories=factories)
    # http_sender needs the container (its closer); webhook deliveries run in the job worker on AWS too.
    c.defer("http_sender", lambda: webhook_sender(c))
    optional: dict[str, tuple[bool, Callable[[], Any]]] = {
        "workflow": (bool(s.ingest_start_queue_url or s.state_machine_arn), lambda: build_aws_workflow(s)),
        "vault": (bool(s.connector_kms_key_id), lambda: _vault(s)),
        "embedder": (bool(s.embedding_model_id), lambda: _embedder(s)),
        "search_index": (bool(s.search_endpoint), lambda: _search_index(s)),
        "scheduler": (bool(s.scheduler_group), lambda: _scheduler(s)),
        "graph": (bool(s.graph_id), lambda: _graph(s)),
        # The default "rules" (spaCy) is local-only: no extraction on AWS unless Bedrock is chosen.
        "extractor": (s.extractor == "bedrock", lambda: _extractor(s)),
        "reranker": (bool(s.rerank_model), lambda: _reranker(s)),
    }
    for name, (configured, factory) in optional.items():
        if configured:
            c.defer(name, factory)
    return c


def _records(s: Settings) -> RecordStore:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore

    return DynamoDbRecordStore(s.records_table)


def _blobs(s: Settings) -> BlobStore:
    from ctxstore.adapters.aws.s3_blobs import S3BlobStore

    return S3BlobStore(s.blob_bucket, sse=s.blob_sse, kms_key_id=s.blob_kms_key_id or None)


def _queue(s: Settings) -> WorkQueue:
    from ctxstore.adapters.aws.dynamodb_queue import DynamoDbWorkQueue

    queue: WorkQueue = DynamoDbWorkQueue(s.jobs_table)
    if s.webhook_queue_url:  # deliveries fan out on SQS (functions/webhook_dispatch), the rest stays
        from ctxstore.adapters.aws.sqs_queue import SqsRoutedWorkQueue
        from ctxstore.services.webhooks.rules import WEBHOOK_QUEUE

        queue = SqsRoutedWorkQueue(queue, {WEBHOOK_QUEUE: s.webhook_queue_url})
    return queue


def _clock() -> Clock:
    from ctxstore.adapters.local.system_clock import SystemClock  # stdlib only; shared by both backends

    return SystemClock()


def build_aws_workflow(s: Settings) -> WorkflowStarter | None:
    """Ingestion's starter: the bounded start queue once CTXSTORE_INGEST_START_QUEUE_URL is set (the template
    sets it; functions/ingest_starter starts the executions), else Step Functions directly once
    CTXSTORE_STATE_MACHINE_ARN is set."""
    if s.ingest_start_queue_url:
        from ctxstore.adapters.aws.ingest_starts import SqsWorkflowStarter

        return SqsWorkflowStarter(s.ingest_start_queue_url)
    if not s.state_machine_arn:
        return None
    from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter

    return SfnWorkflowStarter(s.state_machine_arn)


def bounded_starts(s: Settings, records: RecordStore) -> BoundedStarts:
    """functions/ingest_starter: starts queued ingestions while fewer than CTXSTORE_INGEST_MAX_RUNNING run."""
    from ctxstore.adapters.aws._common import client
    from ctxstore.adapters.aws.faults import install
    from ctxstore.adapters.aws.ingest_starts import BoundedStarts, ExecutionSlots
    from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter

    sfn = SfnWorkflowStarter(s.state_machine_arn)
    slots = ExecutionSlots(records, sfn.status, s.ingest_max_running)
    return BoundedStarts(sfn=sfn, slots=slots, sqs=install(client("sqs")), queue_url=s.ingest_start_queue_url)


def _vault(s: Settings) -> CredentialVault:
    from ctxstore.adapters.aws.kms_vault import KmsVault

    return KmsVault(s.connector_kms_key_id)


def _embedder(s: Settings) -> Embedder:
    from ctxstore.adapters.aws.bedrock_embedder import BedrockEmbedder

    return BedrockEmbedder(s.embedding_model_id, dimensions=s.embedding_dimensions)


def _search_index(s: Settings) -> SearchIndex:
    from ctxstore.adapters.aws.opensearch_index import OpenSearchIndex, opensearch_client

    return OpenSearchIndex(
        opensearch_client(s.search_endpoint, s.search_region or None),
        dimension=s.embedding_dimensions,  # the index's knn_vector size = the embedder's output
        index=s.search_index,
    )


def _scheduler(s: Settings) -> Scheduler:
    from ctxstore.adapters.aws.eventbridge_scheduler import EventBridgeScheduler

    return EventBridgeScheduler(s.scheduler_group, target_arn=s.scheduler_target_arn, role_arn=s.scheduler_role_arn)


def _graph(s: Settings) -> GraphStore:
    from ctxstore.adapters.aws.neptune_graph import NeptuneGraphStore

    return NeptuneGraphStore(
        s.graph_id,
        byog_graphs=s.byog_graph_ids,
        timeout_default_ms=s.byog_read_timeout_ms,
        timeout_max_ms=max(s.byog_read_timeout_ms, s.byog_write_timeout_ms),
    )


def _extractor(s: Settings) -> Extractor | None:
    return build_extractor(s)


def _reranker(s: Settings) -> Reranker:
    from ctxstore.adapters.aws.bedrock_reranker import BedrockReranker

    return BedrockReranker(s.rerank_model)
