"""The MCP tools over stored context: query, ingest (items, memories, documents), status, list, inspect, delete."""

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
    Store,
    StoreArg,
    Turn,
    document,
    knowledge_item,
    memory_item,
    store_of,
)


def register_context_tools(server: MCPServer[Any], answer: Answer) -> None:
    @server.tool(
        name="ctxstore_query", title="Search knowledge and memories", annotations=READ, structured_output=False
    )
    def query(
        ctx: Context,
        query: Annotated[
            str, Field(min_length=1, max_length=10000, description="What to find: a question, keywords or exact terms.")
        ],
        type: Annotated[
            Literal["all", "knowledge", "memory"],
            Field(description="Store to search: knowledge, memory, or all (both, merged into one ranking)."),
        ] = "all",
        mode: Annotated[
            Literal["auto", "fast", "thinking"],
            Field(
                description="fast: one hybrid pass. thinking: adds sub-queries, reranking and linked-source context "
                "(slower, better for compound questions). auto: picks per query."
            ),
        ] = "auto",
        max_results: Annotated[int, Field(ge=1, le=50, description="How many ranked chunks to return.")] = 10,
        query_by: Annotated[
            Literal["hybrid", "text"],
            Field(
                description="hybrid (meaning + keywords, the usual choice) or text (keywords only, for exact terms)."
            ),
        ] = "hybrid",
        exact_phrase: Annotated[
            bool, Field(description="With query_by=text: match the query as one exact phrase.")
        ] = False,
        metadata_filters: Annotated[
            dict[str, Any] | None,
            Field(
                description="Exact-match filters, ANDed. Top-level keys are fields declared in the database's metadata "
                'schema; free-form fields go under "additional_metadata", e.g. '
                '{"additional_metadata": {"team": "sales"}}. '
                "A list value matches any of its values."
            ),
        ] = None,
        graph_context: Annotated[
            bool, Field(description="Also return entity relations behind the results (the graph context).")
        ] = True,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Search the context store and get ranked passages with their source titles and source ids (quote them).
        Use before answering questions about stored documents, notes or what the user told you earlier."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            scope = defaults.scope(database, collection)
            body: dict[str, Any] = {
                "query": query,
                "type": type,
                "mode": mode,
                "max_results": max_results,
                "query_by": query_by,
                "graph_context": graph_context,
            }
            if exact_phrase:
                body["operator"] = "phrase"
            if metadata_filters:
                body["metadata_filters"] = metadata_filters
            return render.query(scope, backend.query(scope, body))

        return answer(ctx, run)

    @server.tool(name="ctxstore_status", title="Indexing status", annotations=READ, structured_output=False)
    def status(
        ctx: Context,
        ids: Annotated[
            list[str], Field(min_length=1, max_length=100, description="Item ids returned by an ingest tool.")
        ],
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Indexing status of ingested items: queued, processing, graph_creation (searchable), completed, or errored
        (with its error code). Unknown ids are reported as not found."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            return render.status(backend.status(defaults.scope(database, collection), list(dict.fromkeys(ids))))

        return answer(ctx, run)

    @server.tool(name="ctxstore_list", title="List stored items", annotations=READ, structured_output=False)
    def list_items(
        ctx: Context,
        type: StoreArg = None,
        kind: KindAlias = None,
        page: Annotated[int, Field(ge=1, description="Page number, from 1.")] = 1,
        page_size: Annotated[int, Field(ge=1, le=100, description="Items per page.")] = 20,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Browse stored knowledge sources or memories, newest first, with ids, titles and indexing status."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            store = store_of(type, kind, "knowledge")
            scope = defaults.scope(database, collection)
            return render.listing(scope, store, backend.list_items(scope, store, page, page_size))

        return answer(ctx, run)

    @server.tool(name="ctxstore_inspect", title="Read a stored item", annotations=READ, structured_output=False)
    def inspect(
        ctx: Context,
        source_id: Annotated[str, Field(min_length=1, description="Id of the source or memory to read.")],
        offset: Annotated[
            int, Field(ge=0, description="First character to return (for reading long items in parts).")
        ] = 0,
        limit: Annotated[int, Field(ge=1, le=20000, description="How many characters to return.")] = 5000,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Read the full text of one stored source or memory (as indexed), in parts for long items."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            return render.inspected(backend.inspect(defaults.scope(database, collection), source_id), offset, limit)

        return answer(ctx, run)

    @server.tool(name="ctxstore_delete", title="Delete items", annotations=DESTROY, structured_output=False)
    def delete(
        ctx: Context,
        ids: Annotated[list[str], Field(min_length=1, max_length=100, description="Ids of the items to delete.")],
        type: Annotated[
            Store | None,
            Field(description="Which store holds the items: knowledge or memory. Required: no default for a deletion."),
        ] = None,
        kind: KindAlias = None,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Delete items for good: their text, search index entries, graph facts and files. Cannot be undone."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            store = store_of(type, kind, None)  # no silent default for a destructive call
            return render.deleted(backend.delete(defaults.scope(database, collection), store, list(ids)))

        return answer(ctx, run)


def register_ingest_tools(server: MCPServer[Any], answer: Answer) -> None:
    @server.tool(
        name="ctxstore_ingest", title="Remember a note or a conversation", annotations=WRITE, structured_output=False
    )
    def ingest(
        ctx: Context,
        text: Annotated[
            str | None, Field(description="A note, fact or signal to store. Give exactly one of text or turns.")
        ] = None,
        turns: Annotated[
            list[Turn] | None,
            Field(
                description="A conversation to store, as user/assistant exchanges. Give exactly one of text or turns."
            ),
        ] = None,
        type: Annotated[
            Store | None,
            Field(description="memory (per-user memory, the default) or knowledge (shared content)."),
        ] = None,
        kind: KindAlias = None,
        infer: Annotated[
            bool,
            Field(
                description="memory only: also extract the user's stated preferences and facts as searchable memories."
            ),
        ] = True,
        title: Annotated[str | None, Field(description="Optional label shown in results.")] = None,
        source_id: Annotated[
            str | None,
            Field(description="Optional id (no commas). Reusing an id replaces that item. Omit to get a new id."),
        ] = None,
        user_name: Annotated[str | None, Field(description="Optional name of the user speaking in the turns.")] = None,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Store a note or a conversation as memory (default) or knowledge. Returns at once with the new ids;
        indexing continues in the background (see ctxstore_status)."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            if (text is None) == (turns is None) or (turns is not None and not turns):
                raise ToolFailure("INVALID_PARAMETERS", "give exactly one of `text` or `turns` (non-empty)")
            store = store_of(type, kind, "memory")
            scope = defaults.scope(database, collection)
            if store == "memory":
                item = memory_item(text, turns, title, source_id, infer, user_name)
            else:
                item = knowledge_item(text, turns, title, source_id, user_name)
            return render.ingest(scope, backend.ingest_items(scope, store, [item]))

        return answer(ctx, run)

    @server.tool(name="ctxstore_ingest_document", title="Add a document", annotations=WRITE, structured_output=False)
    def ingest_document(
        ctx: Context,
        url: Annotated[
            str | None,
            Field(
                description="http(s) URL of a document to fetch and index. Private and loopback addresses are refused."
            ),
        ] = None,
        path: Annotated[
            str | None,
            Field(description="Path of a local file (only with `ctxstore mcp` over stdio, where files are yours)."),
        ] = None,
        content_base64: Annotated[
            str | None, Field(description="The file itself, base64-encoded (up to about 3 MB); needs `filename`.")
        ] = None,
        filename: Annotated[
            str | None,
            Field(
                description="File name; its extension decides the format (pdf, docx, xlsx, pptx, md, txt, csv, png...)."
            ),
        ] = None,
        source_id: Annotated[str | None, Field(description="Optional id (no commas); reusing one replaces it.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Values for fields declared in the database's metadata schema.")
        ] = None,
        additional_metadata: Annotated[
            dict[str, Any] | None, Field(description="Free-form metadata, filterable under additional_metadata.")
        ] = None,
        database: DatabaseArg = None,
        collection: CollectionArg = None,
    ) -> str:
        """Add one document (PDF, Office, OpenDocument, iWork, images via OCR, text, markdown, CSV, JSON) as knowledge,
        from a URL, base64 content or a local path. Returns at once with its id; unsupported formats are reported."""

        def run(backend: ContextBackend, defaults: Defaults) -> str:
            given = [v for v in (url, path, content_base64) if v is not None]
            if len(given) != 1:
                raise ToolFailure("INVALID_PARAMETERS", "give exactly one of `url`, `path` or `content_base64`")
            scope = defaults.scope(database, collection)
            name, data, ctype = document(backend, url, path, content_base64, filename)
            doc_meta: dict[str, Any] = {}
            if source_id:
                doc_meta["id"] = source_id
            if metadata:
                doc_meta["metadata"] = metadata
            if additional_metadata:
                doc_meta["additional_metadata"] = additional_metadata
            return render.ingest(scope, backend.ingest_document(scope, name, data, ctype, doc_meta or None))

        return answer(ctx, run)
