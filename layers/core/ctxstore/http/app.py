"""The local server's app: ALL_ROUTERS, every router group. Lambdas import http.factory instead."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI

from ctxstore.http import factory
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


def create_app(services: Services, routers: Sequence[APIRouter] = ALL_ROUTERS) -> FastAPI:
    """Every router by default (the local server). Lambdas use http.factory.create_app with their group only."""
    return factory.create_app(services, routers)
