"""`ctxstore mcp`: the MCP server over stdio for desktop agents and IDEs, backed by a running ctxstore server."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ctxstore.commands.common import CollectionOpt, DatabaseOpt, guarded, options
from ctxstore.commands.output import Output
from ctxstore.mcp.backend import Defaults


def register(app: typer.Typer) -> None:
    @app.command()
    def mcp(
        ctx: typer.Context,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        graph_database: Annotated[
            str | None, typer.Option(help="Default BYOG database for the graph tools (env CTXSTORE_GRAPH_DATABASE).")
        ] = None,
        allow_private_urls: Annotated[
            bool, typer.Option(help="Let ctxstore_ingest_document fetch URLs on loopback/private networks.")
        ] = False,
    ) -> None:
        """Serve MCP over stdio. Reads CTXSTORE_URL, CTXSTORE_API_KEY, CTXSTORE_DATABASE, CTXSTORE_COLLECTION
        (or the `ctxstore login` file); every tool call goes to that server with that key."""
        from ctxstore.mcp.stdio import run_stdio  # the SDK loads in seconds: only this verb pays for it

        with guarded(Output()):
            settings = options(ctx).settings()
        defaults = Defaults(
            database=database or settings.database,
            collection=collection if collection is not None else settings.collection,
            graph_database=graph_database or os.environ.get("CTXSTORE_GRAPH_DATABASE") or None,
            graph_collection=os.environ.get("CTXSTORE_GRAPH_COLLECTION") or None,
        )
        with settings.client() as client:
            run_stdio(client, defaults, allow_private_urls=allow_private_urls)
