"""Settings from the environment (CTXSTORE_*) and the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXSTORE_", extra="ignore")

    backend: Literal["local", "aws"] = "local"
    data_dir: Path = Path(".ctxstore")
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2  # background job threads in `serve`
    log_format: Literal["text", "json"] = "text"  # CTXSTORE_LOG_FORMAT / `serve --log-format`: json = JSON lines
    # CTXSTORE_METRICS_TOKEN: when set, GET /metrics needs `Authorization: Bearer <it>`; else loopback clients only
    metrics_token: str = ""
    sqlite_busy_timeout_ms: int = 30000  # past this a locked store answers 503
    # Admission control of `serve` (docs/api.md, Overload): requests run at once per class (0: no gate).
    max_inflight_queries: int = 6  # CTXSTORE_MAX_INFLIGHT_QUERIES: POST /query and subgraph reads
    max_inflight_ingests: int = 4  # CTXSTORE_MAX_INFLIGHT_INGESTS: ingest, uploads
    max_inflight_other: int = 12  # CTXSTORE_MAX_INFLIGHT_OTHER: every other route but /health
    admission_wait_s: float = 2.0  # CTXSTORE_ADMISSION_WAIT_S: longest wait for a query slot (others: 2.5x)
    max_databases_per_org: int = 0
    rate_limit_per_minute: int = 0  # 0 disables rate limiting (the local default)
    rate_limit_burst: int = 0
    query_rate_limit_per_minute: int = 0
    allow_private_webhooks: bool = False
    # CTXSTORE_CONSOLE_INLINE_UPLOAD_MAX_BYTES: console uploads larger than this go to blob storage by reference
    # (POST /context/uploads' grant) instead of in the request body. 0 = by backend: 4 MiB on AWS (Lambda's 6 MB
    # request cap counts the base64-encoded body), none locally.
    console_inline_upload_max_bytes: int = 0
    webhook_timeout_s: float = 10.0  # CTXSTORE_WEBHOOK_TIMEOUT_S: per delivery attempt
    webhook_max_attempts: int = 8  # CTXSTORE_WEBHOOK_MAX_ATTEMPTS: then permanently_failed
    webhook_retry_interval_s: float = 30.0  # first backoff; doubles per attempt, full jitter
    webhook_retry_max_delay_s: float = 3600.0
    # Connectors (docs/connectors.md). Provider API base URLs and OAuth token URLs are fixed by the server
    # (tests and self-hosted enterprise instances set them), never by API callers.
    connector_base_url_slack: str = "https://slack.com/api/"
    connector_base_url_github: str = "https://api.github.com"
    connector_base_url_linear: str = "https://api.linear.app/graphql"
    connector_base_url_notion: str = "https://api.notion.com"
    connector_base_url_gmail: str = "https://gmail.googleapis.com/"
    connector_token_url_slack: str = "https://slack.com/api/"  # Slack rotates tokens with oauth.v2.access
    connector_token_url_github: str = "https://github.com/login/oauth/access_token"
    connector_token_url_linear: str = "https://api.linear.app/oauth/token"
    connector_token_url_notion: str = "https://api.notion.com/v1/oauth/token"
    connector_token_url_gmail: str = "https://oauth2.googleapis.com/token"
    connector_tick_s: float = 1.0  # CTXSTORE_CONNECTOR_TICK_S: how often `serve` looks for due syncs
    connector_workers: int = 1  # CTXSTORE_CONNECTOR_WORKERS: sync chunks run at once in `serve`
    connector_chunk_objects: int = 2000  # CTXSTORE_CONNECTOR_CHUNK_OBJECTS: objects per sync chunk (then continue)
    connector_chunk_seconds: float = 60.0  # CTXSTORE_CONNECTOR_CHUNK_SECONDS: time per sync chunk (then continue)
    connector_continue_after_s: float = 1.0  # CTXSTORE_CONNECTOR_CONTINUE_AFTER_S: pause between chunks
    connector_max_wait_s: float = 60.0  # CTXSTORE_CONNECTOR_MAX_WAIT_S: longest provider Retry-After sat out
    connector_http_timeout_s: float = 30.0  # CTXSTORE_CONNECTOR_HTTP_TIMEOUT_S: per provider request
    # CTXSTORE_CONNECTOR_MIN_INTERVAL_S: > 0 lowers every provider's minimum sync_interval_seconds to this
    # (self-hosted operators who want faster syncs; tests).
    connector_min_interval_s: int = 0
    # CTXSTORE_CONNECTOR_RECONCILE_INTERVAL_S: >= 0 replaces every provider's reconcile cadence (least time
    # between two deletion reconciles of one resource; 0 = every cycle); -1 keeps each provider's own.
    connector_reconcile_interval_s: int = -1
    # CTXSTORE_CONNECTOR_PROVIDERS: comma-separated provider ids this server runs (empty = all five); the
    # others stay in the catalogue with `supported: false` and are refused on create.
    connector_providers: str = ""
    connector_kms_key_id: str = ""  # CTXSTORE_CONNECTOR_KMS_KEY_ID (AWS): KMS key sealing connector credentials
    byog_max_rows: int = 10000  # CTXSTORE_BYOG_MAX_ROWS: BYOG result-set cap
    byog_cluster_name: str = "local"
    byog_read_timeout_ms: int = 8000
    byog_write_timeout_ms: int = 30000
    # Entity/relation extraction: "rules" (offline spaCy, the default), "llm" (an OpenAI-compatible
    # chat endpoint, off unless chosen), "bedrock" (Bedrock Converse, AWS), "none".
    extractor: Literal["rules", "llm", "bedrock", "none"] = "rules"
    # CTXSTORE_EXTRACTOR_PROCESSES: "rules" extraction in this many spawned processes (0: in the worker
    # threads, where spaCy's GIL lets only one extract at a time). Lambda has no /dev/shm: keep 0 there.
    extractor_processes: int = 1
    # CTXSTORE_EMBEDDING_PRECISION: the local MiniLM's weights: int8 (2x faster, same quality) or fp32
    embedding_precision: Literal["fp32", "int8"] = "int8"
    # CTXSTORE_TRACE_AWS_CALLS: on Lambda, X-Ray subsegments per AWS call (Powertools' Tracer; costs cold start)
    trace_aws_calls: bool = False
    extractor_model_id: str = ""  # CTXSTORE_EXTRACTOR_MODEL_ID: Bedrock chat model (or inference profile) id
    rerank_model: str = ""  # CTXSTORE_RERANK_MODEL: Bedrock reranking model (AWS), or the model name Infinity serves
    # CTXSTORE_RERANK_URL: a self-hosted rerank server (text-embeddings-inference or Infinity) for thinking mode
    rerank_url: str = ""
    rerank_api: Literal["tei", "infinity"] = "tei"  # CTXSTORE_RERANK_API: the /rerank request shape it speaks
    rerank_api_key: str = ""  # CTXSTORE_RERANK_API_KEY: sent as a bearer token when set
    rerank_timeout_s: float = 10.0
    # Memory inference for infer=true: "rules" (offline, the default) or "llm" (the same endpoint as below).
    inferrer: Literal["rules", "llm"] = "rules"
    llm_base_url: str = ""  # CTXSTORE_LLM_BASE_URL, e.g. http://localhost:11434/v1
    llm_api_key: str = ""  # CTXSTORE_LLM_API_KEY
    llm_model: str = ""  # CTXSTORE_LLM_MODEL
    llm_timeout_s: float = 60.0
    # AWS backend (CTXSTORE_BACKEND=aws): resource names, set by template.yaml on every function.
    records_table: str = ""  # CTXSTORE_RECORDS_TABLE: DynamoDB table of records
    jobs_table: str = ""  # CTXSTORE_JOBS_TABLE: DynamoDB table of queued jobs
    blob_bucket: str = ""  # CTXSTORE_BLOB_BUCKET: S3 bucket of uploads
    blob_sse: str = "AES256"  # CTXSTORE_BLOB_SSE: AES256 or aws:kms
    blob_kms_key_id: str = ""  # CTXSTORE_BLOB_KMS_KEY_ID: with aws:kms; empty = the bucket's default key
    state_machine_arn: str = ""  # CTXSTORE_STATE_MACHINE_ARN: ingestion workflow (Step Functions)
    ingest_start_queue_url: str = ""  # CTXSTORE_INGEST_START_QUEUE_URL: ingestions queue here (bounded starts)
    ingest_max_running: int = 10  # CTXSTORE_INGEST_MAX_RUNNING: ingestion executions running at once, at most
    webhook_queue_url: str = ""  # CTXSTORE_WEBHOOK_QUEUE_URL: webhook deliveries go to SQS (else the jobs table)
    scheduler_group: str = ""  # CTXSTORE_SCHEDULER_GROUP: EventBridge Scheduler group of connector schedules
    scheduler_target_arn: str = ""  # CTXSTORE_SCHEDULER_TARGET_ARN: what each schedule invokes (the job worker)
    scheduler_role_arn: str = ""  # CTXSTORE_SCHEDULER_ROLE_ARN: the role Scheduler assumes to invoke it
    search_endpoint: str = ""  # CTXSTORE_SEARCH_ENDPOINT: OpenSearch Serverless collection endpoint
    search_index: str = "ctxstore-chunks"  # CTXSTORE_SEARCH_INDEX: the collection's one chunks index
    search_region: str = ""  # CTXSTORE_SEARCH_REGION: the collection's region; empty = AWS_REGION
    graph_id: str = ""  # CTXSTORE_GRAPH_ID: Neptune Analytics graph (openCypher)
    # CTXSTORE_BYOG_GRAPH_IDS: JSON {"<org>/<BYOG graph name>": "<graph id>"}: BYOG needs a graph of its own
    byog_graph_ids: dict[str, str] = {}
    embedding_model_id: str = ""  # CTXSTORE_EMBEDDING_MODEL_ID: Bedrock embedding model (Titan Text v2)
    embedding_dimensions: int = 384  # CTXSTORE_EMBEDDING_DIMENSIONS: Titan v2 output size (256, 384, 1024)
