"""Settings from the environment (CTXSTORE_*) and the command line, kept once and grouped by concern.

Each group is a frozen model a service takes whole (the webhook service its `WebhookSettings`, ...). One rule
names a field's variable: `CTXSTORE_` + the group's `env_prefix` + the field name, upper-cased (the webhooks'
`timeout_s` is CTXSTORE_WEBHOOK_TIMEOUT_S); a field whose variable does not follow it names it in
`validation_alias` (without `CTXSTORE_`). The same flat name is accepted as a keyword: `Settings(webhook_timeout_s=1)`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "CTXSTORE_"


class Group(BaseModel):
    """One concern's settings; `env_prefix` is what its fields' flat names start with."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")
    env_prefix: ClassVar[str] = ""

    @classmethod
    def flat_names(cls) -> dict[str, str]:
        """{flat name (the variable without CTXSTORE_, lower case): field name}."""
        return {
            (f.validation_alias if isinstance(f.validation_alias, str) else cls.env_prefix + name).lower(): name
            for name, f in cls.model_fields.items()
        }


class Limits(Group):
    max_databases_per_org: int = 0  # 0: no plan limit
    rate_limit_per_minute: int = 0  # 0 disables rate limiting (the local default)
    rate_limit_burst: int = 0
    query_rate_limit_per_minute: int = 0
    # CTXSTORE_CONSOLE_INLINE_UPLOAD_MAX_BYTES: console uploads larger than this go to blob storage by reference
    # (POST /context/uploads' grant) instead of in the request body. 0 = by backend: 4 MiB on AWS (Lambda's 6 MB
    # request cap counts the base64-encoded body), none locally (the composition root decides).
    console_inline_upload_max_bytes: int = 0


class Admission(Group):
    """Admission control of `serve` (docs/api.md, Overload): requests run at once per class (0: no gate)."""

    max_inflight_queries: int = 6  # CTXSTORE_MAX_INFLIGHT_QUERIES: POST /query and subgraph reads
    max_inflight_ingests: int = 4  # CTXSTORE_MAX_INFLIGHT_INGESTS: ingest, uploads
    max_inflight_other: int = 12  # CTXSTORE_MAX_INFLIGHT_OTHER: every other route but /health
    admission_wait_s: float = 2.0  # CTXSTORE_ADMISSION_WAIT_S: longest wait for a query slot (others: 2.5x)


class WebhookSettings(Group):
    env_prefix = "webhook_"
    timeout_s: float = 10.0  # CTXSTORE_WEBHOOK_TIMEOUT_S: per delivery attempt
    max_attempts: int = 8  # CTXSTORE_WEBHOOK_MAX_ATTEMPTS: then permanently_failed
    retry_interval_s: float = 30.0  # first backoff; doubles per attempt, full jitter
    retry_max_delay_s: float = 3600.0
    # CTXSTORE_ALLOW_PRIVATE_WEBHOOKS: let webhooks target loopback/private addresses
    allow_private: bool = Field(False, validation_alias="allow_private_webhooks")


class ConnectorSettings(Group):
    """Connectors (docs/connectors.md). Provider API base URLs and OAuth token URLs are fixed by the server
    (tests and self-hosted enterprise instances set them), never by API callers."""

    env_prefix = "connector_"
    base_url_slack: str = "https://slack.com/api/"
    base_url_github: str = "https://api.github.com"
    base_url_linear: str = "https://api.linear.app/graphql"
    base_url_notion: str = "https://api.notion.com"
    base_url_gmail: str = "https://gmail.googleapis.com/"
    token_url_slack: str = "https://slack.com/api/"  # Slack rotates tokens with oauth.v2.access
    token_url_github: str = "https://github.com/login/oauth/access_token"
    token_url_linear: str = "https://api.linear.app/oauth/token"
    token_url_notion: str = "https://api.notion.com/v1/oauth/token"
    token_url_gmail: str = "https://oauth2.googleapis.com/token"
    tick_s: float = 1.0  # CTXSTORE_CONNECTOR_TICK_S: how often `serve` looks for due syncs
    workers: int = 1  # CTXSTORE_CONNECTOR_WORKERS: sync chunks run at once in `serve`
    chunk_objects: int = 2000  # CTXSTORE_CONNECTOR_CHUNK_OBJECTS: objects per sync chunk (then continue)
    chunk_seconds: float = 60.0  # CTXSTORE_CONNECTOR_CHUNK_SECONDS: time per sync chunk (then continue)
    continue_after_s: float = 1.0  # CTXSTORE_CONNECTOR_CONTINUE_AFTER_S: pause between chunks
    max_wait_s: float = 60.0  # CTXSTORE_CONNECTOR_MAX_WAIT_S: longest provider Retry-After sat out
    http_timeout_s: float = 30.0  # CTXSTORE_CONNECTOR_HTTP_TIMEOUT_S: per provider request
    # CTXSTORE_CONNECTOR_MIN_INTERVAL_S: > 0 lowers every provider's minimum sync_interval_seconds to this
    # (self-hosted operators who want faster syncs; tests).
    min_interval_s: int = 0
    # CTXSTORE_CONNECTOR_RECONCILE_INTERVAL_S: >= 0 replaces every provider's reconcile cadence (least time
    # between two deletion reconciles of one resource; 0 = every cycle); -1 keeps each provider's own.
    reconcile_interval_s: int = -1
    # CTXSTORE_CONNECTOR_PROVIDERS: comma-separated provider ids this server runs (empty = all five); the
    # others stay in the catalogue with `supported: false` and are refused on create.
    providers: str = ""
    kms_key_id: str = ""  # CTXSTORE_CONNECTOR_KMS_KEY_ID (AWS): KMS key sealing connector credentials

    def urls(self, provider: str) -> tuple[str, str]:
        """(API base URL, OAuth token URL) of one provider; empty for an unknown one."""
        return str(getattr(self, f"base_url_{provider}", "")), str(getattr(self, f"token_url_{provider}", ""))


class ByogSettings(Group):
    env_prefix = "byog_"
    max_rows: int = 10000  # CTXSTORE_BYOG_MAX_ROWS: result-set cap; rows beyond it are dropped silently
    cluster_name: str = "local"
    read_timeout_ms: int = 8000
    write_timeout_ms: int = 30000
    # CTXSTORE_BYOG_GRAPH_IDS (AWS): JSON {"<org>/<BYOG graph name>": "<graph id>"}: BYOG needs a graph of its own
    graph_ids: dict[str, str] = {}


class ExtractionSettings(Group):
    # Entity/relation extraction: "rules" (offline spaCy, the default), "llm" (an OpenAI-compatible
    # chat endpoint, off unless chosen), "bedrock" (Bedrock Converse, AWS), "none".
    extractor: Literal["rules", "llm", "bedrock", "none"] = "rules"
    # CTXSTORE_EXTRACTOR_PROCESSES: "rules" extraction in this many spawned processes (0: in the worker
    # threads, where spaCy's GIL lets only one extract at a time). Lambda has no /dev/shm: keep 0 there.
    # Two: a batch of graph jobs is split between them, so the graph step has both cores once indexing
    # is done (they run at nice 19, below indexing, before that; issue 28).
    extractor_processes: int = 2
    extractor_model_id: str = ""  # CTXSTORE_EXTRACTOR_MODEL_ID: Bedrock chat model (or inference profile) id
    # Memory inference for infer=true: "rules" (offline, the default) or "llm" (the LLM group's endpoint).
    inferrer: Literal["rules", "llm"] = "rules"


class LlmSettings(Group):
    """An OpenAI-compatible chat endpoint for extraction="llm" and inferrer="llm"."""

    env_prefix = "llm_"
    base_url: str = ""  # CTXSTORE_LLM_BASE_URL, e.g. http://localhost:11434/v1
    api_key: str = ""  # CTXSTORE_LLM_API_KEY
    model: str = ""  # CTXSTORE_LLM_MODEL
    timeout_s: float = 60.0


class EmbeddingSettings(Group):
    env_prefix = "embedding_"
    # CTXSTORE_EMBEDDING_PRECISION: the local MiniLM's weights: int8 (2x faster, same quality) or fp32
    precision: Literal["fp32", "int8"] = "int8"
    model_id: str = ""  # CTXSTORE_EMBEDDING_MODEL_ID (AWS): Bedrock embedding model (Titan Text v2)
    dimensions: int = 384  # CTXSTORE_EMBEDDING_DIMENSIONS: Titan v2 output size (256, 384, 1024)


class RerankSettings(Group):
    env_prefix = "rerank_"
    model: str = ""  # CTXSTORE_RERANK_MODEL: Bedrock reranking model (AWS), or the model name Infinity serves
    # CTXSTORE_RERANK_URL: a self-hosted rerank server (text-embeddings-inference or Infinity) for thinking mode
    url: str = ""
    api: Literal["tei", "infinity"] = "tei"  # CTXSTORE_RERANK_API: the /rerank request shape it speaks
    api_key: str = ""  # CTXSTORE_RERANK_API_KEY: sent as a bearer token when set
    timeout_s: float = 10.0


class AwsSettings(Group):
    """AWS backend (CTXSTORE_BACKEND=aws): resource names, set by template.yaml on every function."""

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
    # CTXSTORE_TRACE_AWS_CALLS: on Lambda, X-Ray subsegments per AWS call (Powertools' Tracer; costs cold start)
    trace_aws_calls: bool = False


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # The process: backend, local engine paths, `serve`.
    backend: Literal["local", "aws"] = "local"
    data_dir: Path = Path(".ctxstore")
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2  # background job threads in `serve`
    # CTXSTORE_SHUTDOWN_TIMEOUT_S: SIGTERM/SIGINT to exit of `serve`, at most. Requests in flight get the first
    # half to finish, workers finish their jobs until 70% of it (then release the rest to the queue), the stores
    # close in the remainder; past it the process exits at once (exit 1) and the next start runs what was left.
    shutdown_timeout_s: float = Field(default=30.0, gt=0)
    sqlite_busy_timeout_ms: int = 30000  # past this a locked store answers 503
    # CTXSTORE_VECTOR_ANN_MIN_ROWS: local vector scopes of this many rows or more answer from an HNSW index
    # (adapters/local/ann_index.py, built in the background) instead of the 1-bit shortlist; 0 = never. At 1M
    # rows it answers in 3.8 ms at recall@100 0.981 where the shortlist takes 39 ms (0.999) and keeps the whole
    # matrix resident; at 107k they cost the same (3-4 ms), so smaller scopes keep the shortlist's 0.995.
    vector_ann_min_rows: int = Field(default=200_000, ge=0)
    # CTXSTORE_GRAPH_AOF_REWRITE_MB: the graph engine rewrites its append-only file past this many MB of writes
    # (a restart replays them at ~0.6 MB/s; 0 leaves it to Redis's own 64 MB rule)
    graph_aof_rewrite_mb: float = 4.0
    # CTXSTORE_VECTOR_SNAPSHOT_S: how often the search index looks for large scopes whose vectors changed enough
    # since their last snapshot and saves them, so a start after a crash reads little from SQLite (0: only at stop)
    vector_snapshot_s: float = Field(default=60.0, ge=0)
    # CTXSTORE_KEYWORD_MERGE_S: how often the search index looks for a keyword index of many FTS5 segments that
    # nothing wrote to for a while, and merges it into one (a query probes every segment; 0: never)
    keyword_merge_s: float = Field(default=30.0, ge=0)
    log_format: Literal["text", "json"] = "text"  # CTXSTORE_LOG_FORMAT / `serve --log-format`: json = JSON lines
    # CTXSTORE_METRICS_TOKEN: when set, GET /metrics needs `Authorization: Bearer <it>`; else loopback clients only
    metrics_token: str = ""

    limits: Limits = Limits()
    admission: Admission = Admission()
    webhooks: WebhookSettings = WebhookSettings()
    connectors: ConnectorSettings = ConnectorSettings()
    byog: ByogSettings = ByogSettings()
    extraction: ExtractionSettings = ExtractionSettings()
    llm: LlmSettings = LlmSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    rerank: RerankSettings = RerankSettings()
    aws: AwsSettings = AwsSettings()

    @classmethod
    def groups(cls) -> dict[str, type[Group]]:
        """{attribute: group model} of every group."""
        return {
            name: f.annotation
            for name, f in cls.model_fields.items()
            if isinstance(f.annotation, type) and issubclass(f.annotation, Group)
        }

    @classmethod
    def variables(cls) -> dict[str, FieldInfo]:
        """Every CTXSTORE_* variable read, with its field (its default and type)."""
        out = {ENV_PREFIX + name.upper(): f for name, f in cls.model_fields.items() if name not in cls.groups()}
        for group in cls.groups().values():
            out |= {ENV_PREFIX + flat.upper(): group.model_fields[attr] for flat, attr in group.flat_names().items()}
        return out

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_names(cls, data: Any) -> Any:
        """Settings(webhook_timeout_s=1) sets webhooks.timeout_s: keywords keep the variables' flat names."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, group in cls.groups().items():
            given = {attr: data.pop(flat) for flat, attr in group.flat_names().items() if flat in data}
            if given:
                current = data.get(name)
                base = current.model_dump() if isinstance(current, Group) else dict(current or {})
                data[name] = base | given
        return data

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _GroupVariables(settings_cls), dotenv_settings, file_secret_settings


class _GroupVariables(PydanticBaseSettingsSource):
    """Reads each group field's flat CTXSTORE_* variable into the group (case-insensitive, as pydantic-settings)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the groups whole

    def __call__(self) -> dict[str, Any]:
        env = {k.lower(): v for k, v in os.environ.items()}
        out: dict[str, Any] = {}
        groups = Settings.groups() if issubclass(self.settings_cls, Settings) else {}
        for name, group in groups.items():
            values: dict[str, Any] = {}
            for flat, attr in group.flat_names().items():
                raw = env.get(ENV_PREFIX.lower() + flat)
                if raw is not None:  # JSON for mappings and lists, as pydantic-settings reads complex fields
                    complex_ = get_origin(group.model_fields[attr].annotation) in (dict, list)
                    values[attr] = json.loads(raw) if complex_ else raw
            if values:
                out[name] = values
        return out
