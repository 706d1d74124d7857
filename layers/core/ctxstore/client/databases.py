"""`client.databases`: create, list, readiness, stats, collections, delete (`/databases*`)."""

from __future__ import annotations

import builtins
import time
from collections.abc import Sequence
from typing import Any

from ctxstore.client.models import DatabaseStatus
from ctxstore.client.transport import Transport


class DatabasesApi:
    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def create(self, database: str, *, metadata_schema: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Create a database (202: provisioned in the background; see `wait_ready`). 409 if it exists."""
        body: dict[str, Any] = {"database": database}
        if metadata_schema is not None:
            body["database_metadata_schema"] = list(metadata_schema)
        out: dict[str, Any] = self._t.request("POST", "/databases", json=body)
        return out

    def list(self) -> list[str]:
        """Names of the databases this key can see."""
        data = self._t.request("GET", "/databases")
        return [str(d) for d in data.get("databases", [])]

    def status(self, database: str) -> DatabaseStatus:
        return DatabaseStatus.model_validate(self._t.request("GET", "/databases/status", params={"database": database}))

    def wait_ready(self, database: str, *, timeout: float = 60.0, poll_interval: float = 0.25) -> DatabaseStatus:
        """Poll `status` until every infra flag is true or `timeout` passes; the last status either way."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status(database)
            if st.ready or time.monotonic() >= deadline:
                return st
            time.sleep(poll_interval)

    def stats(self, database: str) -> dict[str, Any]:
        """Chunk counts per store."""
        out: dict[str, Any] = self._t.request("GET", "/databases/stats", params={"database": database})
        return out

    def collections(self, database: str) -> builtins.list[str]:
        data = self._t.request("GET", "/databases/collections", params={"database": database})
        return [str(c) for c in data.get("collections", [])]

    def delete(self, database: str) -> dict[str, Any]:
        """Delete a database and everything in it, for good."""
        out: dict[str, Any] = self._t.request("DELETE", "/databases", params={"database": database})
        return out

    def delete_collection(self, database: str, collection: str) -> dict[str, Any]:
        """Delete one collection and its data; the database stays."""
        params = {"database": database, "collection": collection}
        out: dict[str, Any] = self._t.request("DELETE", "/databases/collections", params=params)
        return out

    def metadata_schema(self, database: str) -> builtins.list[dict[str, Any]]:
        data = self._t.request("GET", f"/databases/{database}/metadata-schema")
        return list(data.get("database_metadata_schema", []))
