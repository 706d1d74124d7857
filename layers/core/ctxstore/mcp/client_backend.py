"""The tools' backend for `ctxstore mcp` (stdio): a running server reached with ctxstore.client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from ctxstore.client import CtxstoreClient, CtxstoreError, Document
from ctxstore.mcp.backend import Scope, ToolFailure

T = TypeVar("T")


@contextmanager
def _as_tool_failure() -> Iterator[None]:
    try:
        yield
    except CtxstoreError as err:
        raise ToolFailure(err.code, err.message) from None


def _store(store: str) -> Literal["knowledge", "memory"]:
    return "memory" if store == "memory" else "knowledge"


class ClientBackend:
    """Every operation is one API call (retried on 429/503 by the client) with this process's key."""

    reads_local_files = True  # stdio runs on the agent's machine: a path is the agent's own file

    def __init__(self, client: CtxstoreClient, *, allow_private_urls: bool = False) -> None:
        self._c = client
        self._allow_private = allow_private_urls

    @property
    def allow_private_urls(self) -> bool:
        return self._allow_private

    def _run(self, fn: Callable[[], T]) -> T:
        with _as_tool_failure():
            return fn()

    def list_databases(self) -> dict[str, Any]:
        return {"databases": self._run(self._c.databases.list)}

    def create_database(self, database: str) -> dict[str, Any]:
        return self._run(lambda: self._c.databases.create(database))

    def database_status(self, database: str) -> dict[str, Any]:
        return self._run(lambda: self._c.databases.status(database).raw())

    def query(self, scope: Scope, body: dict[str, Any]) -> dict[str, Any]:
        knobs = dict(body)
        text = str(knobs.pop("query"))
        return self._run(
            lambda: self._c.query(text, extra=knobs, database=scope.database, collection=scope.collection).raw()
        )

    def ingest_items(self, scope: Scope, store: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        send = self._c.ingest_memories if store == "memory" else self._c.ingest_app_items
        return self._run(lambda: send(items, database=scope.database, collection=scope.collection).raw())

    def ingest_document(
        self, scope: Scope, filename: str, data: bytes, content_type: str | None, metadata: dict[str, Any] | None
    ) -> dict[str, Any]:
        doc = Document(filename, data, content_type)
        return self._run(
            lambda: self._c.ingest_files(
                [doc], metadata=[metadata] if metadata else None, database=scope.database, collection=scope.collection
            ).raw()
        )

    def status(self, scope: Scope, ids: list[str]) -> list[dict[str, Any]]:
        return self._run(
            lambda: [s.raw() for s in self._c.status(ids, database=scope.database, collection=scope.collection)]
        )

    def list_items(self, scope: Scope, store: str, page: int, page_size: int) -> dict[str, Any]:
        return self._run(
            lambda: self._c.list_sources(
                type=_store(store),
                page=page,
                page_size=page_size,
                database=scope.database,
                collection=scope.collection,
            ).raw()
        )

    def inspect(self, scope: Scope, item_id: str) -> dict[str, Any]:
        return self._run(
            lambda: self._c.inspect(item_id, mode="content", database=scope.database, collection=scope.collection).raw()
        )

    def delete(self, scope: Scope, store: str, ids: list[str]) -> dict[str, Any]:
        kind = _store(store)
        return self._run(
            lambda: self._c.delete(ids, type=kind, database=scope.database, collection=scope.collection).raw()
        )

    def relations(self, scope: Scope, store: str, item_id: str | None, limit: int) -> dict[str, Any]:
        kind = _store(store)
        return self._run(
            lambda: self._c.relations(
                item_id, type=kind, limit=limit, database=scope.database, collection=scope.collection
            ).raw()
        )

    def subgraph(self, scope: Scope, store: str, item_id: str, depth: int, max_sources: int) -> dict[str, Any]:
        kind = _store(store)
        return self._run(
            lambda: self._c.subgraph(
                item_id,
                type=kind,
                depth=depth,
                max_sources=max_sources,
                database=scope.database,
                collection=scope.collection,
            ).raw()
        )

    def graph_query(self, scope: Scope, query: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        return self._run(lambda: self._c.byog.query(scope.database, scope.collection, query, params))

    def graph_collections(self, database: str) -> list[str]:
        return self._run(lambda: self._c.byog.collections(database))

    def graph_admin(self, action: str, scope: Scope) -> dict[str, Any]:
        byog = self._c.byog
        if action == "create_database":
            return self._run(lambda: byog.create_database(scope.database))
        if action == "drop_collection":
            return self._run(lambda: byog.drop_collection(scope.database, scope.collection))
        if action == "drop_database":
            return self._run(lambda: byog.drop_database(scope.database))
        raise ToolFailure("INVALID_PARAMETERS", f"unknown action '{action}'")
