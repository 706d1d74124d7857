"""The set of ports one running service uses; built by bootstrap, shared by every entry point."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxstore.ports.blobs import BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.connector_provider import ConnectorProvider
from ctxstore.ports.credential_vault import CredentialVault
from ctxstore.ports.embedder import Embedder
from ctxstore.ports.extractor import Extractor, MemoryInferrer
from ctxstore.ports.graph import GraphStore
from ctxstore.ports.http_sender import HttpSender
from ctxstore.ports.records import RecordStore
from ctxstore.ports.reranker import Reranker
from ctxstore.ports.scheduler import Scheduler
from ctxstore.ports.search_index import SearchIndex
from ctxstore.ports.work_queue import WorkQueue
from ctxstore.ports.workflow import WorkflowStarter
from ctxstore.services.events import EventSink, NullSink


@dataclass(frozen=True)
class Options:
    """Service-wide knobs, taken from settings by bootstrap."""

    backend: str = "local"
    max_databases_per_org: int = 0  # 0: no plan limit
    rate_limit_per_minute: int = 0  # 0: off
    rate_limit_burst: int = 0
    query_rate_limit_per_minute: int = 0
    max_upload_bytes: int = 50 * 1024 * 1024
    byog_max_rows: int = 10000  # result-set cap; rows beyond it are dropped silently
    byog_cluster_name: str = "local"
    byog_read_timeout_ms: int = 8000
    byog_write_timeout_ms: int = 30000
    # BYOG collections the graph store hosts: None = every one (local FalkorDB); on AWS only the
    # `<org>/<graph name>` keys an operator mapped to a graph of their own (CTXSTORE_BYOG_GRAPH_IDS).
    byog_graphs: frozenset[str] | None = None
    allow_private_webhooks: bool = False  # let webhooks target loopback/private addresses
    console_inline_upload_max_bytes: int = 0  # console uploads above go by reference (0: by backend)
    # Admission control (http/admission.py): requests at once per class; 0 turns a class's gate off.
    max_inflight_queries: int = 6
    max_inflight_ingests: int = 4
    max_inflight_other: int = 12
    admission_wait_s: float = 2.0
    webhook_timeout_s: float = 10.0
    webhook_max_attempts: int = 8  # then a delivery is permanently_failed
    webhook_retry_interval_s: float = 30.0  # first backoff; doubles per attempt, full jitter
    webhook_retry_max_delay_s: float = 3600.0
    # Connectors (docs/connectors.md): API base and OAuth token URL per provider, fixed by the server.
    connector_urls: dict[str, tuple[str, str]] = field(default_factory=dict)
    connector_chunk_objects: int = 2000  # a sync chunk ends at the first checkpoint past this many objects...
    connector_chunk_seconds: float = 60.0  # ...or this long; the rest continues in the next chunk
    connector_continue_after_s: float = 1.0  # pause before the next chunk of an unfinished sync
    connector_max_wait_s: float = 60.0  # longest provider Retry-After sat out inside a sync
    connector_http_timeout_s: float = 30.0
    connector_min_interval_s: int = 0  # > 0: lowers every provider's minimum sync interval to this
    connector_reconcile_interval_s: int = -1  # >= 0: replaces every provider's reconcile cadence
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Container:
    records: RecordStore
    blobs: BlobStore
    queue: WorkQueue
    clock: Clock
    options: Options = field(default_factory=Options)
    # Filled in as the backends for them are configured.
    search_index: SearchIndex | None = None
    graph: GraphStore | None = None
    embedder: Embedder | None = None
    extractor: Extractor | None = None
    inferrer: MemoryInferrer | None = None
    reranker: Reranker | None = None  # optional passage reranker for thinking mode (e.g. Bedrock)
    workflow: WorkflowStarter | None = None  # starts ingestion (local queue or Step Functions)
    events: EventSink = field(default_factory=NullSink)  # webhooks replace it in build_services
    scheduler: Scheduler | None = None
    http_sender: HttpSender | None = None  # outbound webhook delivery
    vault: CredentialVault | None = None  # connector credentials at rest
    connector_providers: dict[str, ConnectorProvider] = field(default_factory=dict)
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()
        self.closers.clear()
