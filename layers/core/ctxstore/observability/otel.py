"""OpenTelemetry tracing for `ctxstore serve`: exported over OTLP only when the standard variables are set."""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Tracer

from ctxstore import API_VERSION

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
DEFAULT_SERVICE = "ctxstore"


def exporting(environ: Mapping[str, str] = os.environ) -> bool:
    return any(environ.get(v, "").strip() for v in ENDPOINT_VARS)


def provider_with(exporter: SpanExporter, *, batch: bool = True) -> TracerProvider:
    """A tracer provider sending to this exporter; OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES apply."""
    resource = Resource.create({"service.version": API_VERSION})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):  # the variables named none
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    return provider


def provider_from_env(environ: Mapping[str, str] = os.environ) -> TracerProvider | None:
    """The OTLP/HTTP exporter (it reads the OTEL_EXPORTER_OTLP_* variables itself), or None when none is set."""
    if not exporting(environ):
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return provider_with(OTLPSpanExporter())


def tracer_of(provider: TracerProvider) -> Tracer:
    return provider.get_tracer("ctxstore", API_VERSION)
