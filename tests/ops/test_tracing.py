"""OpenTelemetry spans (issue 27, part 5): around the request, each lane of a query and each pipeline step,
with the SDK's in-memory exporter; and exported over OTLP only when the standard variables are set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxstore import observability as obs
from ctxstore.observability import otel
from tests.ops.observed import ObservedApp, observed_app


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = otel.provider_with(exporter, batch=False)
    obs.set_tracer(otel.tracer_of(provider))
    yield exporter
    obs.set_tracer(None)
    provider.shutdown()


@pytest.fixture
def oa(tmp_path: Path) -> Iterator[ObservedApp]:
    app = observed_app(tmp_path / "data")
    yield app
    app.close()


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_request_query_lanes_and_pipeline_steps_are_spans(oa: ObservedApp, spans: InMemorySpanExporter) -> None:
    oa.create_ready_database("acme")
    oa.ingest_text("doc-1", "Invoices are emailed to customers on the first business day of each month.")
    oa.drain()
    for step in ("parse", "chunk", "embed", "index", "graph"):
        [span] = _named(spans, f"ingest.{step}")
        assert span.attributes is not None and span.attributes["step"] == step
    spans.clear()

    r = oa.client.post("/query", json={"database": "acme", "query": "when are invoices sent"}, headers=oa.headers())
    assert r.status_code == 200
    [request] = _named(spans, "POST /query")
    attrs = dict(request.attributes or {})
    assert attrs["http.route"] == "/query" and attrs["http.response.status_code"] == 200
    assert attrs["ctxstore.request_id"] == r.headers["X-Request-ID"] and attrs["ctxstore.org_id"] == "default"
    assert request.context is not None and request.parent is None
    for lane in ("query.keyword_lanes", "query.embed", "query.vector_lanes"):
        [span] = _named(spans, lane)
        # Each lane is in the request's trace, under it (the keyword lane runs on a pool thread).
        assert span.context is not None and span.context.trace_id == request.context.trace_id, lane
        assert span.parent is not None
        parent = span.parent.span_id
        ids = {s.context.span_id: s for s in spans.get_finished_spans() if s.context is not None}
        while parent != request.context.span_id:
            assert parent in ids, f"{lane} is not under the request span"
            up = ids[parent].parent
            assert up is not None
            parent = up.span_id
    assert oa.key not in str([dict(s.attributes or {}) for s in spans.get_finished_spans()])


def test_otlp_export_only_when_the_standard_variables_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert otel.provider_from_env({}) is None
    assert otel.provider_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}) is None
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        provider = otel.provider_from_env({var: "http://127.0.0.1:4318"})
        assert provider is not None
        assert provider.resource.attributes["service.name"] == "ctxstore"
        provider.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ctxstore-eu")
    named = otel.provider_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert named is not None and named.resource.attributes["service.name"] == "ctxstore-eu"
    named.shutdown()
