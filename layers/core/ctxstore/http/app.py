"""The local server's app: ALL_ROUTERS, every router group. Lambdas import http.factory instead."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI

from ctxstore.console.lazy_mount import mount as mount_console
from ctxstore.http import factory, mcp_mount, observe_routes
from ctxstore.http.observe_middleware import ObserveMiddleware
from ctxstore.http.routers import (
    byog,
    connectors,
    context_ingest,
    context_items,
    databases,
    graphs,
    health,
    query,
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
    query.router,
    signed_blobs.router,
    byog.router,
    webhooks.router,
    connectors.router,
)


def create_app(
    services: Services,
    routers: Sequence[APIRouter] = ALL_ROUTERS,
    observability: observe_routes.Observability | None = None,
) -> FastAPI:
    """Every router, MCP at /mcp and the web console (the local server). Lambdas use http.factory instead."""
    app = factory.create_app(services, routers)
    observe_routes.install(app, observability or observe_routes.Observability())
    # Outermost: admission refusals are measured too. The routers' own routes name what is answered before routing.
    app.add_middleware(ObserveMiddleware, routes=[route for router in routers for route in router.routes])
    mcp_mount.install(app, services)
    mount_console(app, services)
    return app
