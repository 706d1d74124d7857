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


def create_app(services: Services, routers: Sequence[APIRouter]) -> FastAPI:
    app = FastAPI(
        title="ctxstore",
        version=API_VERSION,
        description="Context store for AI applications: ingestion, hybrid retrieval, graphs, connectors, BYOG.",
    )
    app.state.services = services
    for router in routers:
        app.include_router(router)
    errors.install(app)
    openapi_doc.install(app)
    o = services.container.options
    # On AWS each Lambda instance serves one request at a time; the gate is for the one local process.
    admission = (
        Admission(
            AdmissionLimits.of(o.max_inflight_queries, o.max_inflight_ingests, o.max_inflight_other, o.admission_wait_s)
        )
        if o.backend == "local"
        else None
    )
    app.add_middleware(ConventionsMiddleware, keys=services.keys, limiter=services.limiter, admission=admission)
    return app
