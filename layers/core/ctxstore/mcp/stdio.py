"""`ctxstore mcp`: the MCP server over stdio, reaching a running ctxstore server with ctxstore.client."""

from __future__ import annotations

from ctxstore.client import CtxstoreClient
from ctxstore.mcp.backend import Defaults
from ctxstore.mcp.client_backend import ClientBackend
from ctxstore.mcp.tools import build_server


def run_stdio(client: CtxstoreClient, defaults: Defaults, *, allow_private_urls: bool = False) -> None:
    """Serve until stdin closes. Logs go to stderr; stdout carries only protocol messages."""
    backend = ClientBackend(client, allow_private_urls=allow_private_urls)
    server = build_server(lambda ctx: (backend, defaults))
    server.run("stdio")
