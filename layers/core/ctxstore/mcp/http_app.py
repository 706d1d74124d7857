"""Streamable HTTP for the MCP server inside `ctxstore serve`: one ASGI endpoint and its lifespan.

Stateless JSON mode: every POST carries its own Bearer key (checked by the server's middleware before the
request gets here) and its own scope headers, so no session outlives or outranks the request that uses it.
The SDK's transport checks Host and Origin (DNS-rebinding protection) against McpSettings.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ctxstore.mcp.backend import ContextBackend, Defaults, ToolFailure
from ctxstore.mcp.service_backend import ServiceBackend
from ctxstore.mcp.settings import McpSettings
from ctxstore.services.access.principal import Principal
from ctxstore.services.registry import Services

if TYPE_CHECKING:  # the SDK takes seconds to import: only a server that starts /mcp loads it (in `running`)
    from mcp.server.mcpserver import Context
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

PATH = "/mcp"
HEADER_DATABASE = "x-ctxstore-database"
HEADER_COLLECTION = "x-ctxstore-collection"
HEADER_GRAPH_DATABASE = "x-ctxstore-graph-database"
HEADER_GRAPH_COLLECTION = "x-ctxstore-graph-collection"

log = logging.getLogger("ctxstore.mcp")
STARTUP_WAIT_S = 60.0  # a /mcp request that arrives while the SDK still loads waits this long for it

# Stateless mode opens and ends a transport per request; the SDK logs each at INFO ("Terminating session").
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


def defaults_from_headers(headers: Headers) -> Defaults:
    """The call's default scope: X-Ctxstore-Database / -Collection (and -Graph-Database / -Graph-Collection)."""
    return Defaults(
        database=headers.get(HEADER_DATABASE) or None,
        collection=headers.get(HEADER_COLLECTION),
        graph_database=headers.get(HEADER_GRAPH_DATABASE) or None,
        graph_collection=headers.get(HEADER_GRAPH_COLLECTION) or None,
    )


def security(settings: McpSettings) -> TransportSecuritySettings:
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = settings.host_patterns()
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=hosts is not None,
        allowed_hosts=hosts or [],
        allowed_origins=settings.origin_patterns(),
    )


class McpEndpoint:
    """The ASGI app at /mcp. Its session manager lives as long as the server's lifespan (`running()`)."""

    def __init__(
        self, services: Services, principal_of: Callable[[Request], Principal | None], settings: McpSettings
    ) -> None:
        self._services = services
        self._principal_of = principal_of
        self._settings = settings
        self._manager: StreamableHTTPSessionManager | None = None
        self._ready: anyio.Event | None = None  # set once the manager runs (or failed to start)

    def _resolve(self, ctx: Context) -> tuple[ContextBackend, Defaults]:
        request = ctx.request_context.request
        if not isinstance(request, Request):
            raise ToolFailure("UNAUTHORIZED", "no HTTP request behind this call")
        principal = self._principal_of(request)
        if principal is None:  # the middleware refuses unauthenticated requests first; this is a second lock
            raise ToolFailure("UNAUTHORIZED", "send 'Authorization: Bearer <API_KEY>' with every request")
        return ServiceBackend(self._services, principal), defaults_from_headers(request.headers)

    def _build(self) -> Any:
        from ctxstore.mcp.tools import build_server

        server = build_server(self._resolve)
        server.streamable_http_app(
            streamable_http_path=PATH,
            json_response=True,
            stateless_http=True,
            transport_security=security(self._settings),
        )
        return server

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager, run by a task of this lifespan; the server listens before it is up.

        The SDK takes about a second to import: a worker thread builds the MCP server while the API already
        answers (a restarting server's first query does not wait for it); /mcp requests meanwhile wait for it.
        A fresh server and manager per lifespan: a manager runs once, and tests may start an app twice.
        """
        ready = self._ready = anyio.Event()
        stop = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._serve, ready, stop)
            try:
                yield
            finally:
                stop.set()

    async def _serve(self, ready: anyio.Event, stop: anyio.Event) -> None:
        try:
            server = await anyio.to_thread.run_sync(self._build)
        except Exception:
            log.exception("MCP endpoint failed to start; /mcp answers 503")
            ready.set()
            return
        manager = server.session_manager
        async with manager.run():
            self._manager = manager
            ready.set()
            try:
                await stop.wait()
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is None and self._ready is not None:
            with anyio.move_on_after(STARTUP_WAIT_S):
                await self._ready.wait()
        if self._manager is None:
            body: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32603, "message": "MCP not started"},
            }
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)
