"""The item (the spec's "source"): one ingested file, app item or memory; its reference, record and status.

`ItemRecord` is the JSON the records port stores for an item (kind `item`); `services/items/ingest.py` writes
it, status changes and metadata merges rewrite it, and every reader is typed with it, so a key read by
subscript is checked by mypy. (mypy lets `.get` take any key, so readers subscript the keys every record has.)
"""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict sees NotRequired only in evaluated annotations.
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict, cast, get_args

from ctxstore.domain.ingest_request import Store

# The records' key separator (services/record_kinds.SEP): it cannot occur in a database, collection or store name.
KEY_SEP: Final = "\x1f"

ItemStatus = Literal["queued", "processing", "graph_creation", "completed", "errored"]
QUEUED: Final = "queued"
PROCESSING: Final = "processing"
GRAPH_CREATION: Final = "graph_creation"
COMPLETED: Final = "completed"
ERRORED: Final = "errored"
STATUSES: Final[tuple[ItemStatus, ...]] = get_args(ItemStatus)
TERMINAL: Final[frozenset[str]] = frozenset({COMPLETED, ERRORED})
SEARCHABLE: Final[frozenset[str]] = frozenset({GRAPH_CREATION, COMPLETED})

STORES: Final[tuple[Store, ...]] = ("knowledge", "memory")
SourceType = Literal["file", "app", "memory"]


class RelatesTo(TypedDict):
    """One `relates_to` link of the item graph."""

    id: str
    relation: str


class ItemRecord(TypedDict):
    """Every key is written at ingest (services/items/ingest.py `_record`) since the first stored item."""

    id: str
    store: Store
    source_type: SourceType
    title: str
    filename: str | None  # files only
    content_type: str | None  # files only
    size_bytes: int | None  # files only
    ext: str | None
    app_type: str | None  # app items only
    provider: str | None  # app items only
    external_id: str | None  # app items only
    metadata: dict[str, Any]  # validated against the database's metadata schema
    additional_metadata: dict[str, Any]
    relations: list[str]  # forceful relations: ids of related items
    relates_to: list[RelatesTo]
    thread_id: str | None
    parent_id: str | None
    timestamp: float  # the source's own time (epoch seconds), the ingest time when it gave none
    infer: bool
    user_name: str | None
    version: str  # services/items/service.new_version(): time-ordered
    blob_key: str
    status: ItemStatus
    error_code: str | None
    error_message: str | None
    chunk_count: int
    created_at: float
    updated_at: float
    database: str
    collection: str
    relations_created: NotRequired[int]  # written when the item completes


def item_record(data: dict[str, Any]) -> ItemRecord:
    """A stored item's JSON as its type (the records port stores any JSON; items are written as ItemRecord)."""
    return cast(ItemRecord, data)


@dataclass(frozen=True)
class StoredItem:
    """An item's record as read, with the store's version for a conditional rewrite."""

    data: ItemRecord
    version: int


def item_pk(database: str, collection: str, store: str) -> str:
    return f"{database}{KEY_SEP}{collection}{KEY_SEP}{store}"


@dataclass(frozen=True)
class ItemRef:
    database: str
    collection: str
    store: str
    item_id: str

    @property
    def pk(self) -> str:
        return item_pk(self.database, self.collection, self.store)

    def to_json(self) -> dict[str, str]:
        return {"database": self.database, "collection": self.collection, "store": self.store, "id": self.item_id}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "ItemRef":
        return ItemRef(str(d["database"]), str(d["collection"]), str(d["store"]), str(d["id"]))
