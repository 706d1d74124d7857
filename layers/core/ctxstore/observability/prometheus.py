"""The Prometheus metrics of `ctxstore serve` (prometheus-client), served at /metrics.

Labels carry no tenant data: routes are templates (`/context/items/{item_id}`, never a path with ids or a
signed blob token), and organisation ids are not labels at all (one server's operator sees totals).
Gauges of state (queue depth, items by status) are read when scraped, from callables the composition root gives.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from ctxstore import observability as obs

# Request latency buckets: from a cached query (ms) to a slow ingest; steps run longer (seconds to minutes).
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STEP_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# State gauges are counted at most this often: queue depth is an index count; items by status reads counts the
# record store keeps (adapters/local/record_tallies.py; a scan of every item's JSON took 6.9 s at 1.1M items).
STATE_CACHE_S = 10.0
ITEMS_CACHE_S = 10.0

# No `_created` series per counter: they double the text and no dashboard here reads them (process-wide switch).
disable_created_metrics()  # type: ignore[no-untyped-call]


@dataclass
class StateSources:
    """Counts read at scrape time: {(queue, state): jobs} and {status: items}."""

    queue_depth: Callable[[], Mapping[tuple[str, str], int]] = dict
    item_statuses: Callable[[], Mapping[str, int]] = dict


@dataclass
class _Cached:
    read: Callable[[], Mapping[Any, int]]
    cache_s: float
    at: float = -1e9
    value: Mapping[Any, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> Mapping[Any, int]:
        with self.lock:
            if time.monotonic() - self.at >= self.cache_s:
                self.value, self.at = dict(self.read()), time.monotonic()
            return self.value


class _StateCollector(Collector):
    def __init__(self, sources: StateSources, queue_cache_s: float, items_cache_s: float) -> None:
        self._queue = _Cached(sources.queue_depth, queue_cache_s)
        self._items = _Cached(sources.item_statuses, items_cache_s)

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "ctxstore_queue_jobs", "Jobs in the work queue by queue and state", labels=["queue", "state"]
        )
        for key, n in sorted(self._queue.get().items()):
            queue, state = key
            depth.add_metric([str(queue), str(state)], n)
        yield depth
        items = GaugeMetricFamily("ctxstore_items", "Items by indexing status", labels=["status"])
        for status, n in sorted(self._items.get().items()):
            items.add_metric([str(status)], n)
        yield items


class PrometheusMetrics:
    """An `observability` sink with a registry of its own (two servers in one test process never share one)."""

    def __init__(
        self,
        sources: StateSources | None = None,
        *,
        state_cache_s: float = STATE_CACHE_S,
        items_cache_s: float = ITEMS_CACHE_S,
    ) -> None:
        r = self.registry = CollectorRegistry()
        self._requests = Counter(
            "ctxstore_http_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=r,
        )
        self._latency = Histogram(
            "ctxstore_http_request_duration_seconds",
            "HTTP request latency by route template and method",
            ["route", "method"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self._refused = Counter(
            "ctxstore_admission_refusals", "Requests refused by admission control (503) by class", ["klass"], registry=r
        )
        self._steps = Histogram(
            "ctxstore_pipeline_step_duration_seconds",
            "Ingest pipeline step time (parse, chunk, embed, index, graph)",
            ["step"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self._lanes = Histogram(
            "ctxstore_query_lane_duration_seconds",
            "Query lane time (keyword, embed, vector)",
            ["lane"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self._syncs = Counter(
            "ctxstore_connector_syncs",
            "Connector sync runs by provider and outcome",
            ["provider", "outcome"],
            registry=r,
        )
        self._waits = Counter(
            "ctxstore_connector_rate_limit_waits",
            "Provider rate-limit waits sat out, by provider",
            ["provider"],
            registry=r,
        )
        self._waited = Counter(
            "ctxstore_connector_rate_limit_wait_seconds",
            "Seconds spent in provider rate-limit waits, by provider",
            ["provider"],
            registry=r,
        )
        self._deliveries = Counter(
            "ctxstore_webhook_deliveries", "Webhook delivery attempts by outcome", ["outcome"], registry=r
        )
        r.register(_StateCollector(sources or StateSources(), state_cache_s, items_cache_s))

    def observe(self, name: str, value: float, labels: Mapping[str, str]) -> None:
        if name == obs.REQUEST:
            self._requests.labels(labels["route"], labels["method"], labels["status"]).inc()
            self._latency.labels(labels["route"], labels["method"]).observe(value)
        elif name == obs.ADMISSION_REFUSED:
            self._refused.labels(labels["klass"]).inc()
        elif name == obs.PIPELINE_STEP:
            self._steps.labels(labels["step"]).observe(value)
        elif name == obs.QUERY_LANE:
            self._lanes.labels(labels["lane"]).observe(value)
        elif name == obs.CONNECTOR_SYNC:
            self._syncs.labels(labels["provider"], labels["outcome"]).inc()
        elif name == obs.CONNECTOR_RATE_LIMIT_WAIT:
            self._waits.labels(labels["provider"]).inc()
            self._waited.labels(labels["provider"]).inc(value)
        elif name == obs.WEBHOOK_DELIVERY:
            self._deliveries.labels(labels["outcome"]).inc()
        else:
            raise ValueError(f"unknown measurement {name!r}")

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
