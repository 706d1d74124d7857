"""The MCP server and its tools. Each call resolves its backend and default scope from the request.

Tools are plain (sync) functions: the SDK runs them in a worker thread, where the services and the
HTTP client block without stalling the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ctxstore import API_VERSION
from ctxstore.mcp.backend import ContextBackend, Defaults, ToolFailure
from ctxstore.mcp.context_tools import register_context_tools, register_ingest_tools
from ctxstore.mcp.database_tools import register_database_tools
from ctxstore.mcp.graph_tools import register_graph_tools
from ctxstore.mcp.tool_support import MISSING_DATABASE, MISSING_GRAPH_DATABASE

Resolver = Callable[[Context], tuple[ContextBackend, Defaults]]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

INSTRUCTIONS = """\
ctxstore is a context store: knowledge (documents, app items) and per-user memories, searched together.
- Everything lives in a database: ctxstore_list_databases shows them; with none yet, ctxstore_create_database.
- Before answering from memory, search: ctxstore_query (type=all searches knowledge and memories).
- Remember something: ctxstore_ingest (a note as `text`, or a conversation as `turns`). Add a document with
  ctxstore_ingest_document (a URL, base64 content, or a local path when running over stdio).
- Ingestion is asynchronous: ingest tools return ids at once; ctxstore_status tells when each is searchable
  (graph_creation) and done (completed) or failed (errored).
- Browse with ctxstore_list and ctxstore_inspect; follow links with ctxstore_relations and ctxstore_subgraph.
- ctxstore_graph_* run openCypher on hosted graphs you manage yourself (BYOG).
Every call works in one database and collection: the defaults come from the connection; pass `database` /
`collection` to override them for one call. Errors read `CODE: message` with the API's error code."""


def build_server(resolve: Resolver, *, log_level: LogLevel = "INFO") -> MCPServer[Any]:
    """The ctxstore MCP server; `resolve` gives each call its backend (with the caller's rights) and defaults.
    `log_level` is the SDK's root logging level where nothing configured logging before it (stdio)."""
    server: MCPServer[Any] = MCPServer(
        "ctxstore", title="ctxstore context store", version=API_VERSION, instructions=INSTRUCTIONS, log_level=log_level
    )

    def answer(ctx: Context, run: Callable[[ContextBackend, Defaults], str], *, graph: bool = False) -> str:
        """Run one tool body with the call's backend and defaults; an API failure becomes a tool error that
        ends in `CODE: message` (a missing database's message names the tool that creates one)."""
        try:
            return run(*resolve(ctx))
        except ToolFailure as failure:
            message = failure.message
            if failure.code == "DATABASE_NOT_FOUND":
                message += MISSING_GRAPH_DATABASE if graph else MISSING_DATABASE
            raise ToolError(f"{failure.code}: {message}") from None

    register_context_tools(server, answer)
    register_ingest_tools(server, answer)
    register_database_tools(server, answer)
    register_graph_tools(server, answer)
    return server
