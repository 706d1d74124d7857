"""What the MCP tools need from ctxstore, and the scope a call runs in.

Two implementations: `service_backend` calls the services in-process with the caller's principal (the
Streamable HTTP endpoint of `ctxstore serve`), `client_backend` calls a running server over HTTP with
`ctxstore.client` (`ctxstore mcp` over stdio). Both answer the API's `data` shapes as plain dicts and
raise ToolFailure with the API's error code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

DEFAULT_GRAPH_COLLECTION = "default"


class ToolFailure(Exception):
    """A failure the agent should read: the API's error code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Defaults:
    """Scope a call uses when its arguments name none (from request headers, or the environment on stdio)."""

    database: str | None = None
    collection: str | None = None
    graph_database: str | None = None
    graph_collection: str | None = None

    def scope(self, database: str | None, collection: str | None) -> Scope:
        db = database or self.database
        if not db:
            raise ToolFailure(
                "INVALID_PARAMETERS",
                "no database: pass `database`, or set a default (header X-Ctxstore-Database on HTTP, "
                "CTXSTORE_DATABASE for `ctxstore mcp`)",
            )
        return Scope(db, collection if collection is not None else (self.collection or ""))

    def graph_scope(self, database: str | None, collection: str | None) -> Scope:
        db = database or self.graph_database or self.database
        if not db:
            raise ToolFailure(
                "INVALID_PARAMETERS",
                "no graph database: pass `database`, or set X-Ctxstore-Graph-Database / CTXSTORE_GRAPH_DATABASE",
            )
        return Scope(db, collection or self.graph_collection or DEFAULT_GRAPH_COLLECTION)


@dataclass(frozen=True)
class Scope:
    database: str
    collection: str  # "" is the database's default collection


class ContextBackend(Protocol):
    """The operations behind the tools. Every method raises ToolFailure for an API error."""

    @property
    def reads_local_files(self) -> bool:
        """True where `path` names a file on the agent's own machine (stdio); never on the shared server."""
        ...

    @property
    def allow_private_urls(self) -> bool:
        """Whether documents may be fetched from loopback/private addresses (the server's webhook flag)."""
        ...

    def list_databases(self) -> dict[str, Any]: ...

    def create_database(self, database: str) -> dict[str, Any]: ...

    def database_status(self, database: str) -> dict[str, Any]: ...

    def query(self, scope: Scope, body: dict[str, Any]) -> dict[str, Any]: ...

    def ingest_items(self, scope: Scope, store: str, items: list[dict[str, Any]]) -> dict[str, Any]: ...

    def ingest_document(
        self, scope: Scope, filename: str, data: bytes, content_type: str | None, metadata: dict[str, Any] | None
    ) -> dict[str, Any]: ...

    def status(self, scope: Scope, ids: list[str]) -> list[dict[str, Any]]: ...

    def list_items(self, scope: Scope, store: str, page: int, page_size: int) -> dict[str, Any]: ...

    def inspect(self, scope: Scope, item_id: str) -> dict[str, Any]: ...

    def delete(self, scope: Scope, store: str, ids: list[str]) -> dict[str, Any]: ...

    def relations(self, scope: Scope, store: str, item_id: str | None, limit: int) -> dict[str, Any]: ...

    def subgraph(self, scope: Scope, store: str, item_id: str, depth: int, max_sources: int) -> dict[str, Any]: ...

    def graph_query(self, scope: Scope, query: str, params: dict[str, Any] | None) -> list[dict[str, Any]]: ...

    def graph_collections(self, database: str) -> list[str]: ...

    def graph_admin(self, action: str, scope: Scope) -> dict[str, Any]: ...


def not_found_status(item_id: str, message: str = "") -> dict[str, Any]:
    """The status entry of an id the server does not know (as `GET /context/status` lists one)."""
    return {"id": item_id, "indexing_status": None, "error_code": "FILE_NOT_FOUND", "error_message": message}
