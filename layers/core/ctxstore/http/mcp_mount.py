"""Mount the MCP endpoint (Streamable HTTP) at /mcp on the local server's app.

Requests reach it through the same middleware as every route (Bearer key, rate limits, admission), and
its tools run as the principal that middleware authenticated: no second path to the data.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import Route

from ctxstore.http.context import get_context
from ctxstore.mcp.http_app import PATH, McpEndpoint
from ctxstore.mcp.settings import McpSettings
from ctxstore.services.access.principal import Principal
from ctxstore.services.registry import Services


def _principal(request: Request) -> Principal | None:
    return get_context(request.scope).principal


def install(app: FastAPI, services: Services, settings: McpSettings | None = None) -> None:
    settings = settings or McpSettings()
    if not settings.enabled:
        return
    endpoint = McpEndpoint(services, _principal, settings)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["POST"], include_in_schema=False))
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with endpoint.running(), outer(a) as state:
            yield state

    app.router.lifespan_context = lifespan
