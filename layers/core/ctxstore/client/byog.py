"""`client.byog`: hosted openCypher graphs (`/byog/*`): databases, collections, queries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxstore.client.transport import Transport


class ByogApi:
    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def create_database(self, database: str) -> dict[str, Any]:
        """Ready at once: `{database, status: "ready", cluster}`. 409 `DATABASE_ALREADY_EXISTS` if it exists."""
        out: dict[str, Any] = self._t.request("POST", "/byog/databases", json={"database": database})
        return out

    def query(
        self, database: str, collection: str, query: str, params: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Run one openCypher statement against one collection's graph; rows keyed by RETURN alias.

        Pass caller data through `params` (`$name` in the query), never by string formatting.
        """
        body: dict[str, Any] = {"database": database, "collection": collection, "query": query}
        if params:
            body["params"] = dict(params)
        rows = self._t.request("POST", "/byog/query", json=body)
        return list(rows or [])

    def collections(self, database: str) -> list[str]:
        data = self._t.request("GET", "/byog/collections", params={"database": database})
        return [str(c) for c in data.get("collections", [])]

    def drop_collection(self, database: str, collection: str) -> dict[str, Any]:
        body = {"database": database, "collection": collection}
        out: dict[str, Any] = self._t.request("DELETE", "/byog/collections", json=body)
        return out

    def drop_database(self, database: str) -> dict[str, Any]:
        out: dict[str, Any] = self._t.request("DELETE", "/byog/databases", json={"database": database})
        return out
