"""What `ctxstore serve` shows of itself: Prometheus metrics over the local stores, OpenTelemetry traces when the
OTLP variables are set, and the warm-up that /ready reports (graph engine, vector scopes)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxstore import observability as obs
from ctxstore.config import Settings
from ctxstore.http.observe_routes import Observability
from ctxstore.observability import otel
from ctxstore.observability.prometheus import ITEMS_CACHE_S, STATE_CACHE_S, PrometheusMetrics, StateSources
from ctxstore.observability.readiness import Readiness, Step, warm_up
from ctxstore.services.container import Container
from ctxstore.services.items.service import ITEM

log = logging.getLogger("ctxstore")


@dataclass
class Running:
    """The observability of one server; `close` uninstalls it (and flushes spans still batched)."""

    observability: Observability
    closers: list[Callable[[], None]] = field(default_factory=list)
    warming: list[threading.Thread] = field(default_factory=list)

    def wait_warmed(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the warm-up threads; False if one still runs. A stop soon after the start
        finds the embedder still building its sessions in native code, and the interpreter's teardown then aborts
        (SIGABRT): the caller closes what it can and leaves without teardown."""
        deadline = time.monotonic() + timeout
        for thread in self.warming:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self.warming)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.closers.clear()


def state_sources(c: Container) -> StateSources:
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
    from ctxstore.adapters.local.sqlite_records import SqliteRecordStore

    queue, records = c.queue, c.records
    return StateSources(
        queue_depth=queue.depth_by_state if isinstance(queue, SqliteWorkQueue) else dict,
        item_statuses=(lambda: records.count_by(ITEM, "status")) if isinstance(records, SqliteRecordStore) else dict,
    )


def warm_up_steps(c: Container) -> list[Step]:
    """What a first query waits for when cold: the graph engine, the vector scopes and the embedding model."""
    from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore
    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex

    steps: list[Step] = []
    if isinstance(c.graph, FalkorGraphStore):
        steps.append(("graph", c.graph.warm))
    if isinstance(c.search_index, SqliteSearchIndex):
        steps.append(("vectors", c.search_index.warm_vectors))
        embedder = c.embedder
        if embedder is not None:
            steps.append(("embedder", lambda: embedder.embed_query("warm-up")))  # builds the model's query session
    return steps


def start_observability(
    settings: Settings,
    c: Container,
    *,
    steps: list[Step] | None = None,
    state_cache_s: float = STATE_CACHE_S,
    items_cache_s: float = ITEMS_CACHE_S,
) -> Running:
    """Install the metrics sink and (with OTLP variables) the tracer, and start the warm-up in the background."""
    metrics = PrometheusMetrics(state_sources(c), state_cache_s=state_cache_s, items_cache_s=items_cache_s)
    readiness = Readiness()
    running = Running(Observability(metrics, readiness, settings.metrics_token))
    obs.add_sink(metrics)
    running.closers.append(lambda: obs.remove_sink(metrics))
    provider = otel.provider_from_env()
    if provider is not None:
        obs.set_tracer(otel.tracer_of(provider))
        running.closers.append(provider.shutdown)
        running.closers.append(lambda: obs.set_tracer(None))
        log.info("tracing: exporting spans over OTLP")
    running.warming = warm_up(readiness, warm_up_steps(c) if steps is None else steps)
    return running
