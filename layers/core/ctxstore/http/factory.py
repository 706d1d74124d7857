"""create_app for a given set of routers, importing none itself.

Each Lambda builds its app here with only its own router group, so a cold start loads that group's
routers alone; `ctxstore.http.app` adds every router for the local server.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI

from ctxstore import API_VERSION
from ctxstore.http import errors, openapi_doc
from ctxstore.http.admission import Admission, AdmissionLimits
from ctxstore.http.middleware import ConventionsMiddleware
from ctxstore.services.registry import Services


def routed_app(routers: Sequence[APIRouter]) -> FastAPI:
    """The FastAPI app of these routers, no services or middleware: what an OpenAPI document describes."""
    app = FastAPI(
        title="ctxstore",
        version=API_VERSION,
        description="Context store for AI applications: ingestion, hybrid retrieval, graphs, connectors, BYOG.",
    )
    for router in routers:
        app.include_router(router)
    return app


def create_app(services: Services, routers: Sequence[APIRouter]) -> FastAPI:
    app = routed_app(routers)
    app.state.services = services
    errors.install(app)
    capabilities = services.container.capabilities
    if capabilities.serves_static_openapi:
        # A Lambda holds one router group; API Gateway routes GET /openapi.json to one of them, which answers
        # the whole API's document as shipped in the layer (scripts/export-openapi.py writes it).
        openapi_doc.install_document(app, openapi_doc.AWS_DOCUMENT)
    else:
        openapi_doc.install(app)
    # On AWS each Lambda instance serves one request at a time; the gate is for the one local process.
    o = services.container.settings.admission
    admission = (
        Admission(
            AdmissionLimits.of(o.max_inflight_queries, o.max_inflight_ingests, o.max_inflight_other, o.admission_wait_s)
        )
        if capabilities.admission_gate
        else None
    )
    app.add_middleware(ConventionsMiddleware, keys=services.keys, limiter=services.limiter, admission=admission)
    return app
