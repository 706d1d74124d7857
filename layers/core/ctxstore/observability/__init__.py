"""The product's hooks to be seen from outside: measurements and trace spans.

Stdlib only, importing nothing of ours: the pipeline, retrieval and services call these on every backend, and a
Lambda loads none of the libraries behind them. Nothing is recorded until the composition root installs a sink
(`ctxstore serve`: Prometheus metrics, `observability/prometheus.py`) or a tracer (OpenTelemetry, `otel.py`);
on AWS Powertools carries the same numbers (docs/operations.md, Monitor).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

# Measurement names: each is one metric of the Prometheus sink (a sink refuses a name it does not know).
REQUEST = "http_request"  # seconds; labels route, method, status
ADMISSION_REFUSED = "admission_refused"  # count; label klass
PIPELINE_STEP = "pipeline_step"  # seconds; label step: parse, chunk, embed, index, graph
QUERY_LANE = "query_lane"  # seconds; label lane: keyword, embed, vector
CONNECTOR_SYNC = "connector_sync"  # count; labels provider, outcome: done, more, error, blocked
CONNECTOR_RATE_LIMIT_WAIT = "connector_rate_limit_wait"  # seconds sat out; label provider
WEBHOOK_DELIVERY = "webhook_delivery"  # count; label outcome: delivered, retrying, permanently_failed

NAMES = frozenset(
    {
        REQUEST,
        ADMISSION_REFUSED,
        PIPELINE_STEP,
        QUERY_LANE,
        CONNECTOR_SYNC,
        CONNECTOR_RATE_LIMIT_WAIT,
        WEBHOOK_DELIVERY,
    }
)


class Sink(Protocol):
    def observe(self, name: str, value: float, labels: Mapping[str, str]) -> None:
        """A duration (seconds) or, for counts, 1."""


class Tracer(Protocol):
    """What OpenTelemetry's `Tracer` offers and the hooks use."""

    def start_as_current_span(self, name: str, *, attributes: Mapping[str, Any] | None = ...) -> Any: ...


_sinks: list[Sink] = []
_tracer: list[Tracer] = []


def add_sink(sink: Sink) -> None:
    _sinks.append(sink)


def remove_sink(sink: Sink) -> None:
    if sink in _sinks:
        _sinks.remove(sink)


def set_tracer(tracer: Tracer | None) -> None:
    _tracer[:] = [tracer] if tracer is not None else []


def observe(name: str, value: float, **labels: str) -> None:
    for sink in list(_sinks):
        sink.observe(name, value, labels)


def count(name: str, **labels: str) -> None:
    observe(name, 1.0, **labels)


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A trace span around a block (the current span's child); nothing when no tracer is installed."""
    if not _tracer:
        return _nothing()
    return _tracer[0].start_as_current_span(name, attributes=attributes)  # type: ignore[no-any-return]


@contextmanager
def timed(name: str, span_name: str, **labels: str) -> Iterator[None]:
    """Measure the block's duration under `name` and trace it as `span_name` (also when it raises)."""
    started = time.perf_counter()
    try:
        with span(span_name, **labels):
            yield
    finally:
        observe(name, time.perf_counter() - started, **labels)


@contextmanager
def _nothing() -> Iterator[None]:
    yield
