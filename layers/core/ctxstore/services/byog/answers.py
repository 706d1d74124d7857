"""What the BYOG routes render for databases and collections (not the Cypher rows), exactly their JSON keys."""

from __future__ import annotations

from typing import TypedDict


class ByogDatabaseCreated(TypedDict):
    """POST /byog/databases: ready at once (collections are graphs the engine creates on first write)."""

    database: str
    status: str
    cluster: str


class ByogCollections(TypedDict):
    """GET /byog/databases/collections."""

    database: str
    collections: list[str]


class ByogCollectionDeleted(TypedDict):
    database: str
    collection: str
    deleted: bool


class ByogDatabaseDeleted(TypedDict):
    database: str
    cluster: str
    deleted: bool
    deleted_collections: list[str]
