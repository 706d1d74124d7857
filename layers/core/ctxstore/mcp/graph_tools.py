"""The MCP tools over graphs: entity relations, linked items and BYOG (openCypher graphs of their own)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from ctxstore.mcp import render
from ctxstore.mcp.backend import ContextBackend, Defaults, ToolFailure
from ctxstore.mcp.tool_support import (
    DESTROY,
    READ,
    WRITE,
    Answer,
    CollectionArg,
    DatabaseArg,
    KindAlias,
    StoreArg,
    store_of,
)


def register_graph_tools(server: MCPServer[Any], answer: Answer) -> None:
    @server.tool(name="ctxstore_relations", title="Entity relations", annotations=READ, structured_output=False)
    def relations(
        ctx: Context,
        source_id: Annotated[
            str | None,
            Field(description="One item's relations; omit for the strongest relations of the whole collection."),
        ] = None,
        type: StoreArg = None,
        kind: KindAlias = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most entity pairs to return.")] = 20,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Entity relations extracted from stored text (who works where, what was founded by whom...), with the
        sentence each comes from. Complete once an item's status is completed."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            store = store_of(type, kind, "knowledge")
            return render.relations(backend.relations(defaults.scope(database, collection), store, source_id, limit))

        return answer(ctx, run)

    @server.tool(name="ctxstore_subgraph", title="Linked items", annotations=READ, structured_output=False)
    def subgraph(
        ctx: Context,
        source_id: Annotated[str, Field(min_length=1, description="Item to start from.")],
        type: StoreArg = None,
        kind: KindAlias = None,
        depth: Annotated[int, Field(ge=1, le=10, description="Most hops from the start item.")] = 2,
        max_sources: Annotated[int, Field(ge=1, le=200, description="Most items to return.")] = 50,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Items linked to one item (same thread, parent/child, explicit links such as replies and references),
        nearest first."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            store = store_of(type, kind, "knowledge")
            scope = defaults.scope(database, collection)
            return render.subgraph(backend.subgraph(scope, store, source_id, depth, max_sources))

        return answer(ctx, run)

    @server.tool(
        name="ctxstore_graph_query", title="openCypher on a BYOG graph", annotations=WRITE, structured_output=False
    )
    def graph_query(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                min_length=1,
                description="One openCypher statement (MATCH, CREATE, MERGE, SET, DELETE...). Pass values as $params. "
                "Procedure calls and LOAD CSV are refused.",
            ),
        ],
        params: Annotated[
            dict[str, Any] | None, Field(description='Query parameters, e.g. {"name": "Ada"} for $name.')
        ] = None,
        max_rows: Annotated[int, Field(ge=1, le=1000, description="Most rows to show.")] = 100,
        database: Annotated[
            str | None, Field(description="BYOG database; omit for the connection's default graph database.")
        ] = None,
        collection: Annotated[
            str | None, Field(description="Graph inside the database (created on first write); default 'default'.")
        ] = None,
    ) -> str:
        """Run openCypher against one of your hosted graphs (BYOG). Rows come back as JSON objects keyed by
        RETURN alias."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            return render.rows(backend.graph_query(defaults.graph_scope(database, collection), query, params), max_rows)

        return answer(ctx, run, graph=True)

    @server.tool(name="ctxstore_graph_collections", title="List BYOG graphs", annotations=READ, structured_output=False)
    def graph_collections(
        ctx: Context,
        database: Annotated[
            str | None, Field(description="BYOG database; omit for the connection's default graph database.")
        ] = None,
    ) -> str:
        """List the graphs (collections) of a BYOG database."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            db = defaults.graph_scope(database, None).database
            names = backend.graph_collections(db)
            return f'{len(names)} graphs in BYOG database "{db}"' + (": " + ", ".join(names) if names else ".")

        return answer(ctx, run, graph=True)

    @server.tool(
        name="ctxstore_graph_admin", title="Create or drop BYOG graphs", annotations=DESTROY, structured_output=False
    )
    def graph_admin(
        ctx: Context,
        action: Annotated[
            Literal["create_database", "drop_collection", "drop_database"],
            Field(
                description="create_database: a new BYOG database (ready at once). drop_collection: delete one graph. "
                "drop_database: delete the database and all its graphs. Drops cannot be undone."
            ),
        ],
        database: Annotated[
            str | None, Field(description="BYOG database; omit for the connection's default graph database.")
        ] = None,
        collection: Annotated[str | None, Field(description="The graph to drop (drop_collection).")] = None,
    ) -> str:
        """Create a BYOG database, or drop a graph or a whole BYOG database."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            if action == "drop_collection" and not collection:
                raise ToolFailure("INVALID_PARAMETERS", "drop_collection needs `collection`")
            scope = defaults.graph_scope(database, collection)
            out = backend.graph_admin(action, scope)
            if action == "create_database":
                return f'BYOG database "{scope.database}" is {out.get("status", "ready")}.'
            if action == "drop_collection":
                return f'Graph "{scope.collection}" of BYOG database "{scope.database}" dropped.'
            dropped = out.get("deleted_collections") or []
            return f'BYOG database "{scope.database}" dropped with {len(dropped)} graphs.'

        return answer(ctx, run, graph=True)
