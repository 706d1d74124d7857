"""Builds the container for the configured backend. The only module that imports adapters."""

from __future__ import annotations

from ctxstore.config import Settings
from ctxstore.ports.extractor import Extractor
from ctxstore.ports.work_queue import WorkSignal
from ctxstore.ports.workflow import WorkflowStarter
from ctxstore.services.container import Container, Options


def options_from(settings: Settings) -> Options:
    return Options(
        backend=settings.backend,
        max_databases_per_org=settings.max_databases_per_org,
        rate_limit_per_minute=settings.rate_limit_per_minute,
        rate_limit_burst=settings.rate_limit_burst,
        query_rate_limit_per_minute=settings.query_rate_limit_per_minute,
        byog_max_rows=settings.byog_max_rows,
        byog_cluster_name=settings.byog_cluster_name,
        byog_read_timeout_ms=settings.byog_read_timeout_ms,
        byog_write_timeout_ms=settings.byog_write_timeout_ms,
        allow_private_webhooks=settings.allow_private_webhooks,
        console_inline_upload_max_bytes=settings.console_inline_upload_max_bytes,
        max_inflight_queries=settings.max_inflight_queries,
        max_inflight_ingests=settings.max_inflight_ingests,
        max_inflight_other=settings.max_inflight_other,
        admission_wait_s=settings.admission_wait_s,
        webhook_timeout_s=settings.webhook_timeout_s,
        webhook_max_attempts=settings.webhook_max_attempts,
        webhook_retry_interval_s=settings.webhook_retry_interval_s,
        webhook_retry_max_delay_s=settings.webhook_retry_max_delay_s,
        connector_urls=connector_urls(settings),
        connector_chunk_objects=settings.connector_chunk_objects,
        connector_chunk_seconds=settings.connector_chunk_seconds,
        connector_continue_after_s=settings.connector_continue_after_s,
        connector_max_wait_s=settings.connector_max_wait_s,
        connector_http_timeout_s=settings.connector_http_timeout_s,
        connector_min_interval_s=settings.connector_min_interval_s,
        connector_reconcile_interval_s=settings.connector_reconcile_interval_s,
    )


def connector_urls(settings: Settings) -> dict[str, tuple[str, str]]:
    """(API base URL, OAuth token URL) per provider, from CTXSTORE_CONNECTOR_BASE_URL_/_TOKEN_URL_<PROVIDER>."""
    from ctxstore.domain.connector_rules import PROVIDER_IDS

    return {
        p: (str(getattr(settings, f"connector_base_url_{p}")), str(getattr(settings, f"connector_token_url_{p}")))
        for p in PROVIDER_IDS
    }


def _add_connectors(c: Container, settings: Settings) -> None:
    """Provider implementations on their official SDKs (ctxstore.connectors), shared by both backends."""
    from ctxstore.connectors.registry import build_providers

    enabled = {p.strip() for p in settings.connector_providers.split(",") if p.strip()}
    c.connector_providers = build_providers(enabled or None)


def build_local(settings: Settings) -> Container:
    from ctxstore.adapters.local.aesgcm_vault import AesGcmVault
    from ctxstore.adapters.local.fs_blobs import FsBlobStore, load_signing_key
    from ctxstore.adapters.local.sqlite_db import SqliteDb
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
    from ctxstore.adapters.local.sqlite_records import SqliteRecordStore
    from ctxstore.adapters.local.sqlite_scheduler import SqliteScheduler
    from ctxstore.adapters.local.system_clock import SystemClock

    data = settings.data_dir
    data.mkdir(parents=True, exist_ok=True)
    db = SqliteDb(data / "records.db", busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    c = Container(
        records=SqliteRecordStore(db),
        blobs=FsBlobStore(data / "blobs", signing_key=load_signing_key(data / "url_signing.key")),
        queue=SqliteWorkQueue(db),
        clock=SystemClock(),
        options=options_from(settings),
        scheduler=SqliteScheduler(db),
        vault=AesGcmVault(data / "connector_credentials.key"),
    )
    c.closers.append(db.close)
    _add_connectors(c, settings)
    _add_webhook_sender(c)
    _add_local_search(c, settings)
    _add_local_graph(c, settings)
    return c


def _add_local_search(c: Container, settings: Settings) -> None:
    """Ingestion on the local queue; chunks in data_dir/search.db; the embedding model from its package."""
    from ctxstore.adapters.local.local_embedder import CachedEmbedder, LocalEmbedder, document_threads_per_worker
    from ctxstore.adapters.local.queue_workflow import QueueWorkflowStarter
    from ctxstore.adapters.local.rule_inferrer import RuleInferrer
    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex

    c.workflow = QueueWorkflowStarter(c.queue)
    index = SqliteSearchIndex(settings.data_dir / "search.db")
    c.search_index = index
    c.embedder = CachedEmbedder(
        LocalEmbedder(
            precision=settings.embedding_precision,
            document_threads=document_threads_per_worker(settings.workers),
            document_sessions=settings.workers,  # each worker's document calls on a session of its own
        )
    )
    c.inferrer = RuleInferrer()
    if settings.inferrer == "llm":
        from ctxstore.adapters.local.llm_inferrer import LlmMemoryInferrer

        if not (settings.llm_base_url and settings.llm_model):
            raise ValueError("CTXSTORE_INFERRER=llm needs CTXSTORE_LLM_BASE_URL and CTXSTORE_LLM_MODEL")
        llm = LlmMemoryInferrer(
            settings.llm_base_url, settings.llm_model, api_key=settings.llm_api_key, timeout_s=settings.llm_timeout_s
        )
        c.inferrer = llm
        c.closers.append(llm.close)
    c.closers.append(index.close)
    if settings.rerank_url:  # thinking mode orders its pool with it; the offline rerank answers if it fails
        from ctxstore.adapters.local.http_reranker import HttpReranker

        reranker = HttpReranker(
            settings.rerank_url,
            api=settings.rerank_api,
            model=settings.rerank_model,
            api_key=settings.rerank_api_key,
            timeout_s=settings.rerank_timeout_s,
        )
        c.reranker = reranker
        c.closers.append(reranker.close)


def _add_webhook_sender(c: Container) -> None:
    """Outbound HTTP for webhook deliveries (httpx; no redirects, no proxies from the environment)."""
    from ctxstore.adapters.local.httpx_sender import HttpxSender

    sender = HttpxSender()
    c.http_sender = sender
    c.closers.append(sender.close)


def _add_local_graph(c: Container, settings: Settings) -> None:
    """Embedded FalkorDB under data_dir/graph; the process starts on first use and stops on close."""
    from ctxstore.adapters.local.falkordb_engine import FalkorEngine
    from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore

    engine = FalkorEngine(
        settings.data_dir / "graph",
        timeout_default_ms=settings.byog_read_timeout_ms,
        timeout_max_ms=max(settings.byog_read_timeout_ms, settings.byog_write_timeout_ms),
        resultset_size=settings.byog_max_rows if settings.byog_max_rows > 0 else -1,
    )
    graph = FalkorGraphStore(engine)
    c.graph = graph
    c.closers.append(engine.stop)
    c.closers.append(graph.close)
    c.extractor = build_extractor(settings)


def build_extractor(settings: Settings) -> Extractor | None:
    """The entity/relation extractor of the graph step: offline rules unless an LLM is configured."""
    if settings.extractor == "none":
        return None
    if settings.extractor == "llm":
        from ctxstore.adapters.local.llm_extractor import LlmExtractor

        if not (settings.llm_base_url and settings.llm_model):
            raise ValueError("CTXSTORE_EXTRACTOR=llm needs CTXSTORE_LLM_BASE_URL and CTXSTORE_LLM_MODEL")
        return LlmExtractor(
            settings.llm_base_url, settings.llm_model, api_key=settings.llm_api_key, timeout_s=settings.llm_timeout_s
        )
    if settings.extractor == "bedrock":
        from ctxstore.adapters.aws.bedrock_extractor import BedrockExtractor

        if not settings.extractor_model_id:
            raise ValueError("CTXSTORE_EXTRACTOR=bedrock needs CTXSTORE_EXTRACTOR_MODEL_ID")
        return BedrockExtractor(settings.extractor_model_id)
    from ctxstore.adapters.local.spacy_extractor import SpacyExtractor

    # A process pool needs /dev/shm, which Lambda lacks: only the local server runs one.
    return SpacyExtractor(processes=settings.extractor_processes if settings.backend == "local" else 0)


def recover_local(c: Container) -> int:
    """Start-up recovery for `ctxstore serve`: hand out again the jobs a killed server was holding."""
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue

    return c.queue.release_leases() if isinstance(c.queue, SqliteWorkQueue) else 0


def local_work_signal(c: Container) -> WorkSignal | None:
    """The local queue's in-process wake-up for `serve`'s runners (None on other queues: they poll)."""
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue

    return c.queue.signal if isinstance(c.queue, SqliteWorkQueue) else None


def build_aws(settings: Settings) -> Container:
    """The AWS backend: DynamoDB records and jobs, S3 blobs, OpenSearch Serverless chunks, Bedrock embeddings
    (names from CTXSTORE_* set by template.yaml).

    Builds boto3 clients only (no network calls), so a Lambda can build it once per cold start.
    """
    from ctxstore.adapters.aws.dynamodb_queue import DynamoDbWorkQueue
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore
    from ctxstore.adapters.aws.s3_blobs import S3BlobStore
    from ctxstore.adapters.local.system_clock import SystemClock  # stdlib only; shared by both backends

    c = Container(
        records=DynamoDbRecordStore(settings.records_table),
        blobs=S3BlobStore(settings.blob_bucket, sse=settings.blob_sse, kms_key_id=settings.blob_kms_key_id or None),
        queue=DynamoDbWorkQueue(settings.jobs_table),
        clock=SystemClock(),
        options=options_from(settings),
        workflow=build_aws_workflow(settings),
    )
    if settings.webhook_queue_url:  # deliveries fan out on SQS (functions/webhook_dispatch), the rest stays
        from ctxstore.adapters.aws.sqs_queue import SqsRoutedWorkQueue
        from ctxstore.services.webhooks import WEBHOOK_QUEUE

        c.queue = SqsRoutedWorkQueue(c.queue, {WEBHOOK_QUEUE: settings.webhook_queue_url})
    _add_webhook_sender(c)  # httpx only: webhook deliveries run in the job worker on AWS too
    _add_connectors(c, settings)
    if settings.connector_kms_key_id:
        from ctxstore.adapters.aws.kms_vault import KmsVault

        c.vault = KmsVault(settings.connector_kms_key_id)
    if settings.embedding_model_id:
        from ctxstore.adapters.aws.bedrock_embedder import BedrockEmbedder

        c.embedder = BedrockEmbedder(settings.embedding_model_id, dimensions=settings.embedding_dimensions)
    if settings.search_endpoint:
        from ctxstore.adapters.aws.opensearch_index import OpenSearchIndex, opensearch_client

        c.search_index = OpenSearchIndex(
            opensearch_client(settings.search_endpoint, settings.search_region or None),
            dimension=settings.embedding_dimensions,  # the index's knn_vector size = the embedder's output
            index=settings.search_index,
        )
    if settings.scheduler_group:
        from ctxstore.adapters.aws.eventbridge_scheduler import EventBridgeScheduler

        c.scheduler = EventBridgeScheduler(
            settings.scheduler_group, target_arn=settings.scheduler_target_arn, role_arn=settings.scheduler_role_arn
        )
    if settings.graph_id:
        from ctxstore.adapters.aws.neptune_graph import NeptuneGraphStore

        c.graph = NeptuneGraphStore(
            settings.graph_id,
            byog_graphs=settings.byog_graph_ids,
            timeout_default_ms=settings.byog_read_timeout_ms,
            timeout_max_ms=max(settings.byog_read_timeout_ms, settings.byog_write_timeout_ms),
        )
    if settings.extractor == "bedrock":  # the default "rules" (spaCy) is local-only: no extraction unless chosen
        c.extractor = build_extractor(settings)
    if settings.rerank_model:  # thinking mode orders its pool with it; the offline rerank answers if it fails
        from ctxstore.adapters.aws.bedrock_reranker import BedrockReranker

        c.reranker = BedrockReranker(settings.rerank_model)
    return c


def build_aws_workflow(settings: Settings) -> WorkflowStarter | None:
    """The Step Functions starter for ingestion, once CTXSTORE_STATE_MACHINE_ARN is set."""
    if not settings.state_machine_arn:
        return None
    from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter

    return SfnWorkflowStarter(settings.state_machine_arn)


def build_container(settings: Settings | None = None) -> Container:
    settings = settings or Settings()
    if settings.backend == "local":
        return build_local(settings)
    return build_aws(settings)
