"""The MCP tools over databases: list them (with readiness) and create one."""

from __future__ import annotations

import time
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from ctxstore.mcp import render
from ctxstore.mcp.backend import ContextBackend, Defaults, ToolFailure
from ctxstore.mcp.tool_support import MAX_STATUS_LOOKUPS, READ, WRITE, Answer


def register_database_tools(server: MCPServer[Any], answer: Answer) -> None:
    @server.tool(name="ctxstore_list_databases", title="List databases", annotations=READ, structured_output=False)
    def list_databases(ctx: Context) -> str:
        """List the databases this connection's key can use, with whether each is ready, and which one is the
        default. Start here when unsure where to store or search; create one with ctxstore_create_database."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            data = backend.list_databases()
            names = [str(n) for n in data.get("databases", [])]
            shown = names[:MAX_STATUS_LOOKUPS]
            states = {n: str(backend.database_status(n).get("status") or "unknown") for n in shown}
            return render.databases(names, states, data.get("failed_databases") or [], defaults.database)

        return answer(ctx, run)

    @server.tool(name="ctxstore_create_database", title="Create a database", annotations=WRITE, structured_output=False)
    def create_database(
        ctx: Context,
        database: Annotated[
            str | None,
            Field(
                description="Name of the new database (letters, digits, '-' and '_'); omit to create the "
                "connection's default database."
            ),
        ] = None,
        wait_seconds: Annotated[
            int, Field(ge=0, le=60, description="Seconds to wait for the database to become ready (0: do not wait).")
        ] = 20,
    ) -> str:
        """Create a database, the container every other tool works in, and wait until it is ready for ingestion.
        An agent with no database yet starts here. Fails with DATABASE_ALREADY_EXISTS if the name is taken."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            name = database or defaults.database
            if not name:
                raise ToolFailure("INVALID_PARAMETERS", "give `database`: the name of the database to create")
            backend.create_database(name)
            deadline = time.monotonic() + wait_seconds
            status = "provisioning"
            while True:
                status = str(backend.database_status(name).get("status") or status)
                if status == "ready" or time.monotonic() >= deadline:
                    break
                time.sleep(0.25)
            return render.created_database(name, status, is_default=name == defaults.database)

        return answer(ctx, run)
