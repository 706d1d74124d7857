"""create_app: the same app for the local server (every router) and each Lambda (one router)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI

from ctxstore import API_VERSION
from ctxstore.http import errors
from ctxstore.http.middleware import ConventionsMiddleware
from ctxstore.http.routers import (
    byog,
    context_ingest,
    context_items,
    databases,
    graphs,
    health,
    signed_blobs,
    webhooks,
)
from ctxstore.services.registry import Services

ALL_ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    databases.router,
    context_ingest.router,
    context_items.router,
    graphs.router,
    signed_blobs.router,
    byog.router,
    webhooks.router,
)


def create_app(services: Services, routers: Sequence[APIRouter] = ALL_ROUTERS) -> FastAPI:
    app = FastAPI(
        title="ctxstore",
        version=API_VERSION,
        description="Context store for AI applications: ingestion, hybrid retrieval, graphs, connectors, BYOG.",
    )
    app.state.services = services
    for router in routers:
        app.include_router(router)
    errors.install(app)
    app.add_middleware(ConventionsMiddleware, keys=services.keys, limiter=services.limiter)
    return app
