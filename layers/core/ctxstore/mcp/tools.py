"""The MCP server and its tools. Each call resolves its backend and default scope from the request.

Tools are plain (sync) functions: the SDK runs them in a worker thread, where the services and the
HTTP client block without stalling the event loop.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from ctxstore import API_VERSION
from ctxstore.mcp import render
from ctxstore.mcp.backend import ContextBackend, Defaults, ToolFailure
from ctxstore.mcp.url_fetch import FetchRefused, fetch

Resolver = Callable[[Context], tuple[ContextBackend, Defaults]]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

MAX_INLINE_BYTES = 3 * 1024 * 1024  # base64 content rides in the JSON-RPC body (4 MiB cap): ~3 MB of file
MISSING_DATABASE = " (see ctxstore_list_databases, or create it with ctxstore_create_database)"
MISSING_GRAPH_DATABASE = " (create it with ctxstore_graph_admin action=create_database)"
MAX_STATUS_LOOKUPS = 50  # ctxstore_list_databases shows readiness for this many databases; the rest by name

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

DatabaseArg = Annotated[
    str | None, Field(description="Database to use for this call; omit to use the connection's default database.")
]
CollectionArg = Annotated[
    str | None,
    Field(
        description="Collection inside the database; omit for the connection's default ('' is the default collection)."
    ),
]
Store = Literal["knowledge", "memory"]
StoreArg = Annotated[
    Store | None,
    Field(
        description="Which store holds the items: knowledge (documents, app items, notes) or memory (memories). "
        "Default knowledge."
    ),
]
KindAlias = Annotated[
    Store | None,
    Field(
        description="Deprecated alias of `type` (the API's and the command line's name), still accepted from older "
        "clients. Send `type`.",
        json_schema_extra={"deprecated": True},
    ),
]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class Turn(BaseModel):
    """One exchange of a conversation."""

    user: str = Field(default="", description="What the user said.")
    assistant: str = Field(default="", description="What the assistant answered.")


def _store(type_: Store | None, kind: Store | None, default: Store | None) -> Store:
    """The store a call names: `type`, or its deprecated alias `kind`, or the tool's default (None: required)."""
    if type_ is not None and kind is not None and type_ != kind:
        raise ToolFailure(
            "INVALID_PARAMETERS", f"`type` is {type_} but the deprecated `kind` is {kind}: send `type` only"
        )
    chosen = type_ or kind or default
    if chosen is None:
        raise ToolFailure("INVALID_PARAMETERS", "`type` is required: knowledge or memory")
    return chosen


def _memory_item(
    text: str | None,
    turns: list[Turn] | None,
    title: str | None,
    source_id: str | None,
    infer: bool,
    user_name: str | None,
) -> dict[str, Any]:
    item: dict[str, Any] = {"infer": infer}
    if text is not None:
        item["text"] = text
    else:
        item["user_assistant_pairs"] = [t.model_dump() for t in turns or []]
    item.update({k: v for k, v in (("title", title), ("id", source_id), ("user_name", user_name)) if v})
    return item


def _knowledge_item(
    text: str | None, turns: list[Turn] | None, title: str | None, source_id: str | None, user_name: str | None
) -> dict[str, Any]:
    if text is None:
        speaker = user_name or "User"
        text = "\n".join(f"{speaker}: {t.user}\nAssistant: {t.assistant}" for t in turns or [])
    first_line = text.strip().splitlines()[0] if text.strip() else "note"
    item: dict[str, Any] = {
        "title": title or first_line[:80],
        "type": "note" if turns is None else "conversation",
        "content": {"text": text},
    }
    if source_id:
        item["id"] = source_id
    return item


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
            store = _store(type, kind, "memory")
            scope = defaults.scope(database, collection)
            if store == "memory":
                item = _memory_item(text, turns, title, source_id, infer, user_name)
            else:
                item = _knowledge_item(text, turns, title, source_id, user_name)
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
            name, data, ctype = _document(backend, url, path, content_base64, filename)
            doc_meta: dict[str, Any] = {}
            if source_id:
                doc_meta["id"] = source_id
            if metadata:
                doc_meta["metadata"] = metadata
            if additional_metadata:
                doc_meta["additional_metadata"] = additional_metadata
            return render.ingest(scope, backend.ingest_document(scope, name, data, ctype, doc_meta or None))

        return answer(ctx, run)

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
            store = _store(type, kind, "knowledge")
            scope = defaults.scope(database, collection)
            return render.listing(scope, store, backend.list_sources(scope, store, page, page_size))

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
            store = _store(type, kind, None)  # no silent default for a destructive call
            return render.deleted(backend.delete(defaults.scope(database, collection), store, list(ids)))

        return answer(ctx, run)

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
            store = _store(type, kind, "knowledge")
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
            store = _store(type, kind, "knowledge")
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

    return server


def _document(
    backend: ContextBackend, url: str | None, path: str | None, content_base64: str | None, filename: str | None
) -> tuple[str, bytes, str | None]:
    if url is not None:
        try:
            got = fetch(url, allow_private=backend.allow_private_urls)
        except FetchRefused as exc:
            raise ToolFailure("INVALID_PARAMETERS", str(exc)) from None
        return filename or got.filename, got.data, got.content_type
    if path is not None:
        if not backend.reads_local_files:
            raise ToolFailure(
                "INVALID_PARAMETERS",
                "`path` is only read by `ctxstore mcp` over stdio (your own files); "
                "here send `url` or `content_base64`",
            )
        file = Path(path).expanduser()
        if not file.is_file():
            raise ToolFailure("INVALID_PARAMETERS", f"no file at '{path}'")
        return filename or file.name, file.read_bytes(), None
    if not filename:
        raise ToolFailure("INVALID_PARAMETERS", "`content_base64` needs `filename` (its extension decides the format)")
    try:
        data = base64.b64decode(content_base64 or "", validate=True)
    except (binascii.Error, ValueError):
        raise ToolFailure("INVALID_PARAMETERS", "`content_base64` is not valid base64") from None
    if len(data) > MAX_INLINE_BYTES:
        raise ToolFailure("INVALID_PARAMETERS", "`content_base64` is over 3 MB; send a `url` instead")
    return filename, data, None
