"""The local backend, built up front for `ctxstore serve` and the CLI's server verbs: SQLite records, queue and
search index, files for blobs, the embedding model in process, embedded FalkorDB for graphs."""

from __future__ import annotations

import logging

from ctxstore.adapters.local.data_dir_format import DataDirTooNew, open_data_dir
from ctxstore.config import Settings
from ctxstore.ports.work_queue import WorkSignal
from ctxstore.runtime.capabilities import capabilities_of
from ctxstore.runtime.common_ports import build_extractor, connector_providers, webhook_sender
from ctxstore.services.container import Container

__all__ = ["DataDirTooNew", "build_local", "local_work_signal", "recover_local"]


def build_local(settings: Settings) -> Container:
    from ctxstore.adapters.local.aesgcm_vault import AesGcmVault
    from ctxstore.adapters.local.fs_blobs import FsBlobStore, load_signing_key
    from ctxstore.adapters.local.sqlite_db import SqliteDb
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
    from ctxstore.adapters.local.sqlite_records import SqliteRecordStore
    from ctxstore.adapters.local.sqlite_scheduler import SqliteScheduler
    from ctxstore.adapters.system.system_clock import SystemClock

    data = settings.data_dir
    migrated = open_data_dir(data)  # refuses a newer release's data dir before anything opens it
    if migrated:
        logging.getLogger("ctxstore").info("data dir %s migrated to format %s", data, migrated[-1])
    db = SqliteDb(data / "records.db", busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    c = Container(
        records=SqliteRecordStore(db),
        blobs=FsBlobStore(data / "blobs", signing_key=load_signing_key(data / "url_signing.key")),
        queue=SqliteWorkQueue(db),
        clock=SystemClock(),
        settings=settings,
        capabilities=capabilities_of(settings),
        scheduler=SqliteScheduler(db),
        vault=AesGcmVault(data / "connector_credentials.key"),
    )
    c.closers.append(db.close)
    c.connector_providers = connector_providers(settings)
    c.http_sender = webhook_sender(c)
    _add_local_search(c, settings)
    _add_local_graph(c, settings)
    return c


def _add_local_search(c: Container, settings: Settings) -> None:
    """Ingestion on the local queue; chunks in data_dir/search.db; the embedding model from its package."""
    from ctxstore.adapters.local.queue_workflow import QueueWorkflowStarter
    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
    from ctxstore.adapters.models.local_embedder import CachedEmbedder, LocalEmbedder, document_threads_per_worker
    from ctxstore.adapters.models.rule_inferrer import RuleInferrer

    c.workflow = QueueWorkflowStarter(c.queue)
    index = SqliteSearchIndex(
        settings.data_dir / "search.db",
        snapshot_every_s=settings.vector_snapshot_s,
        keyword_merge_every_s=settings.keyword_merge_s,
        ann_min_rows=settings.vector_ann_min_rows or None,
    )
    c.search_index = index
    c.embedder = CachedEmbedder(
        LocalEmbedder(
            precision=settings.embedding.precision,
            document_threads=document_threads_per_worker(settings.workers),
            document_sessions=settings.workers,  # each worker's document calls on a session of its own
        )
    )
    c.inferrer = RuleInferrer()
    if settings.extraction.inferrer == "llm":
        from ctxstore.adapters.models.llm_inferrer import LlmMemoryInferrer

        if not (settings.llm.base_url and settings.llm.model):
            raise ValueError("CTXSTORE_INFERRER=llm needs CTXSTORE_LLM_BASE_URL and CTXSTORE_LLM_MODEL")
        llm = LlmMemoryInferrer(
            settings.llm.base_url, settings.llm.model, api_key=settings.llm.api_key, timeout_s=settings.llm.timeout_s
        )
        c.inferrer = llm
        c.closers.append(llm.close)
    c.closers.append(index.close)
    if settings.rerank.url:  # thinking mode orders its pool with it; the offline rerank answers if it fails
        from ctxstore.adapters.models.http_reranker import HttpReranker

        reranker = HttpReranker(
            settings.rerank.url,
            api=settings.rerank.api,
            model=settings.rerank.model,
            api_key=settings.rerank.api_key,
            timeout_s=settings.rerank.timeout_s,
        )
        c.reranker = reranker
        c.closers.append(reranker.close)


def _add_local_graph(c: Container, settings: Settings) -> None:
    """Embedded FalkorDB under data_dir/graph; the process starts on first use and stops on close."""
    from ctxstore.adapters.local.falkordb_engine import FalkorEngine
    from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore

    engine = FalkorEngine(
        settings.data_dir / "graph",
        timeout_default_ms=settings.byog.read_timeout_ms,
        timeout_max_ms=max(settings.byog.read_timeout_ms, settings.byog.write_timeout_ms),
        resultset_size=settings.byog.max_rows if settings.byog.max_rows > 0 else -1,
        aof_rewrite_bytes=int(settings.graph_aof_rewrite_mb * 1024 * 1024),
    )
    graph = FalkorGraphStore(engine)
    c.graph = graph
    c.closers.append(engine.stop)
    c.closers.append(graph.close)
    c.extractor = build_extractor(settings)


def recover_local(c: Container) -> int:
    """Start-up recovery for `ctxstore serve`: hand out again the jobs a killed server was holding."""
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue

    return c.queue.release_leases() if isinstance(c.queue, SqliteWorkQueue) else 0


def local_work_signal(c: Container) -> WorkSignal | None:
    """The local queue's in-process wake-up for `serve`'s runners (None on other queues: they poll)."""
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue

    return c.queue.signal if isinstance(c.queue, SqliteWorkQueue) else None
