"""The tools' backend inside `ctxstore serve`: the same services the HTTP routers call, as the caller's key."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ctxstore.domain.errors import ApiError, StoreUnavailable
from ctxstore.domain.ingest_request import Upload, parse_ingest
from ctxstore.domain.scopes import validate_collection_name, validate_database_name
from ctxstore.mcp.backend import Scope, ToolFailure, not_found_status
from ctxstore.parsing.formats import classify
from ctxstore.services.access.principal import Principal
from ctxstore.services.byog.service import ByogService
from ctxstore.services.graphs.service import GraphService
from ctxstore.services.registry import Services

T = TypeVar("T")


@contextmanager
def _as_tool_failure() -> Iterator[None]:
    try:
        yield
    except ApiError as err:
        raise ToolFailure(err.code.value, err.message) from None
    except StoreUnavailable:
        raise ToolFailure("SERVICE_UNAVAILABLE", "a storage dependency is temporarily unavailable; retry") from None


class ServiceBackend:
    """One call's view of the services: every operation runs as `principal` (the request's Bearer key)."""

    reads_local_files = False  # a path would name a file on the server, not the agent's: never read

    def __init__(self, services: Services, principal: Principal) -> None:
        self._svc = services
        self._p = principal

    @property
    def allow_private_urls(self) -> bool:
        return self._svc.webhooks.settings.allow_private

    def _charge_query(self) -> None:
        """A query or subgraph read through /mcp costs what POST /query costs: one token of the key's query
        class (the HTTP middleware only charged /mcp itself to the default class)."""
        with _as_tool_failure():
            self._svc.limiter.check(self._p.key_prefix, "query", time.monotonic())

    def _run(self, fn: Callable[[], T]) -> T:
        with _as_tool_failure():
            return fn()

    @staticmethod
    def _names(scope: Scope) -> tuple[str, str]:
        with _as_tool_failure():
            return validate_database_name(scope.database), validate_collection_name(scope.collection)

    def _graphs(self) -> GraphService:
        if self._svc.graphs is None:
            raise ToolFailure("SERVICE_UNAVAILABLE", "graphs are not configured on this deployment")
        return self._svc.graphs

    def _byog(self) -> ByogService:
        if self._svc.byog is None:
            raise ToolFailure("SERVICE_UNAVAILABLE", "BYOG is not configured on this deployment")
        return self._svc.byog

    # ---- databases -------------------------------------------------------------------------------
    def list_databases(self) -> dict[str, Any]:
        return self._run(lambda: dict(self._svc.databases.list(self._p)))

    def create_database(self, database: str) -> dict[str, Any]:
        return self._run(lambda: dict(self._svc.databases.create(self._p, database, None, "database_metadata_schema")))

    def database_status(self, database: str) -> dict[str, Any]:
        return self._run(lambda: dict(self._svc.databases.status(self._p, database)))

    # ---- context ---------------------------------------------------------------------------------
    def query(self, scope: Scope, body: dict[str, Any]) -> dict[str, Any]:
        db, col = self._names(scope)
        query = self._svc.query
        if query is None:
            raise ToolFailure("SERVICE_UNAVAILABLE", "query is not configured on this deployment")
        self._charge_query()
        return self._run(lambda: dict(query.query(self._p, {**body, "database": db, "collection": col})))

    def ingest_items(self, scope: Scope, store: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        db, col = self._names(scope)
        encoded = json.dumps(items)

        def accept() -> dict[str, Any]:
            req = parse_ingest(
                store_raw=store,
                database=db,
                collection=col,
                upsert_raw="true",
                uploads=[],
                document_metadata=None,
                app_knowledge=encoded if store == "knowledge" else None,
                memories=encoded if store == "memory" else None,
                graph_payload=None,
                classify=classify,
            )
            return dict(self._svc.ingest.accept(self._p, req))

        return self._run(accept)

    def ingest_document(
        self, scope: Scope, filename: str, data: bytes, content_type: str | None, metadata: dict[str, Any] | None
    ) -> dict[str, Any]:
        db, col = self._names(scope)

        def accept() -> dict[str, Any]:
            req = parse_ingest(
                store_raw="knowledge",
                database=db,
                collection=col,
                upsert_raw="true",
                uploads=[Upload(filename=filename, content_type=content_type, data=data)],
                document_metadata=json.dumps([metadata]) if metadata else None,
                app_knowledge=None,
                memories=None,
                graph_payload=None,
                classify=classify,
            )
            return dict(self._svc.ingest.accept(self._p, req))

        return self._run(accept)

    def status(self, scope: Scope, ids: list[str]) -> list[dict[str, Any]]:
        db, col = self._names(scope)
        try:
            with _as_tool_failure():
                statuses = [dict(s) for s in self._svc.status.lookup(self._p, db, col, ids)["statuses"]]
                return statuses
        except ToolFailure as failure:
            if failure.code != "FILE_NOT_FOUND":  # every id unknown: the route's 404, here one entry per id
                raise
            return [not_found_status(i, failure.message) for i in ids]

    def list_items(self, scope: Scope, store: str, page: int, page_size: int) -> dict[str, Any]:
        db, col = self._names(scope)
        return self._run(
            lambda: dict(
                self._svc.catalog.list_items(
                    self._p, db, col, store, page=page, page_size=page_size, ids=None, filters={}, include_fields=None
                )
            )
        )

    def inspect(self, scope: Scope, item_id: str) -> dict[str, Any]:
        db, col = self._names(scope)

        def no_url(*_: object) -> str:  # mode=content never asks for a download link
            raise ToolFailure("INVALID_PARAMETERS", "download links are not offered over MCP")

        return self._run(
            lambda: dict(
                self._svc.catalog.inspect(
                    self._p, db, col, item_id, mode="content", expiry_seconds=3600, url_for=no_url
                )
            )
        )

    def delete(self, scope: Scope, store: str, ids: list[str]) -> dict[str, Any]:
        db, col = self._names(scope)
        return self._run(lambda: dict(self._svc.catalog.delete(self._p, db, col, store, ids)))

    def relations(self, scope: Scope, store: str, item_id: str | None, limit: int) -> dict[str, Any]:
        db, col = self._names(scope)
        graphs = self._graphs()
        return self._run(
            lambda: dict(
                graphs.relations(
                    self._p, db, col, store, item_id=item_id, limit_raw=str(limit), cursor_raw=None, principals=None
                )
            )
        )

    def subgraph(self, scope: Scope, store: str, item_id: str, depth: int, max_sources: int) -> dict[str, Any]:
        db, col = self._names(scope)
        graphs = self._graphs()
        self._charge_query()
        return self._run(
            lambda: dict(
                graphs.subgraph(
                    self._p,
                    db,
                    col,
                    store,
                    item_id,
                    depth_raw=str(depth),
                    max_sources_raw=str(max_sources),
                    principals=None,
                )
            )
        )

    # ---- BYOG ------------------------------------------------------------------------------------
    def graph_query(self, scope: Scope, query: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        byog = self._byog()
        return self._run(lambda: byog.query(self._p, scope.database, scope.collection, query, params))

    def graph_collections(self, database: str) -> list[str]:
        byog = self._byog()
        data = self._run(lambda: byog.list_collections(self._p, database))
        return [str(c) for c in data.get("collections", [])]

    def graph_admin(self, action: str, scope: Scope) -> dict[str, Any]:
        byog = self._byog()
        if action == "create_database":
            return self._run(lambda: dict(byog.create_database(self._p, scope.database)))
        if action == "drop_collection":
            return self._run(lambda: dict(byog.delete_collection(self._p, scope.database, scope.collection)))
        if action == "drop_database":
            return self._run(lambda: dict(byog.delete_database(self._p, scope.database)))
        raise ToolFailure("INVALID_PARAMETERS", f"unknown action '{action}'")
