"""`ctxstore mcp`: the MCP server over stdio, reaching a running ctxstore server with ctxstore.client."""

from __future__ import annotations

import logging

from ctxstore.client import CtxstoreClient
from ctxstore.mcp.backend import Defaults
from ctxstore.mcp.client_backend import ClientBackend
from ctxstore.mcp.tools import build_server

# Desktop agents show a server's stderr as errors: one line per HTTP request (httpx logs each at INFO) or per
# failed tool call (the SDK, at INFO; the agent gets the error itself) would flood it. Warnings still show.
QUIET_LOGGERS = ("httpx", "httpcore")


def run_stdio(client: CtxstoreClient, defaults: Defaults, *, allow_private_urls: bool = False) -> None:
    """Serve until stdin closes. Logs go to stderr (warnings and errors only); stdout carries only protocol messages."""
    backend = ClientBackend(client, allow_private_urls=allow_private_urls)
    server = build_server(lambda ctx: (backend, defaults), log_level="WARNING")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    server.run("stdio")
