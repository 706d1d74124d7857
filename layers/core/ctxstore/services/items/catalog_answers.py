"""What the item catalog answers: the JSON of POST /context/list, GET /context/inspect, GET /context/chunks,
DELETE /context and PATCH /context/{id}/metadata, as TypedDicts, and an item's listing row.

The keys are the spec's (its `sources` is the list of items); their order is the JSON's, so build them in it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.items import ItemRecord, ItemRef, ItemStatus, RelatesTo, SourceType

JsonObject = dict[str, Any]  # metadata: any JSON object the caller sent


class RelationIds(TypedDict):
    ids: list[str]


class ItemRow(TypedDict):
    """The keys of every item's row in a listing; each kind of item adds its own (below)."""

    id: str
    title: str
    type: SourceType
    database: str
    collection: str
    tenant_id: str
    sub_tenant_id: str
    metadata: JsonObject
    additional_metadata: JsonObject
    indexing_status: ItemStatus
    error_code: str
    chunk_count: int
    created_at: str
    updated_at: str
    timestamp: str | None
    relations: RelationIds
    relates_to: list[RelatesTo]
    thread_id: str | None
    parent_id: str | None


class FileRow(ItemRow):
    filename: str | None
    content_type: str | None
    size_bytes: int | None


class AppRow(ItemRow):
    """The names of the reference, the spec's subgraph members and query results (not the record's own)."""

    app_kind: str | None
    app_provider: str | None
    app_external_id: str | None


class MemoryRow(ItemRow):
    user_name: str | None
    infer: bool


ListedItem = FileRow | AppRow | MemoryRow
# A knowledge row cut to the request's `include_fields` (and the scope's names): any subset of a ListedItem.
PickedRow = dict[str, object]


class Pagination(TypedDict):
    page: int
    page_size: int
    total: int
    total_pages: int
    has_next: bool
    has_previous: bool


class ItemListAnswer(TypedDict):
    """POST /context/list's data."""

    success: bool
    message: str
    sources: list[ListedItem | PickedRow]
    total: int
    pagination: Pagination


class _InspectedItem(TypedDict):
    id: str
    success: bool
    message: str
    error: str
    title: str
    type: SourceType
    indexing_status: ItemStatus
    content_type: str
    size_bytes: int


# total=False rather than NotRequired: with postponed annotations only this is seen at run time too.
class ItemInspectAnswer(_InspectedItem, total=False):
    """GET /context/inspect's data: the content keys with mode content or both, the link keys with url or both."""

    content: str
    inferred_content: str
    presigned_url: str
    expires_in: int


class ChunkRow(TypedDict):
    chunk_id: str
    position: int
    text: str
    title: str
    metadata: JsonObject
    additional_metadata: JsonObject


class ItemChunksAnswer(TypedDict):
    """GET /context/chunks's data: one page of an item's chunks in order."""

    id: str
    type: str  # the store: knowledge or memory
    indexing_status: ItemStatus
    total: int
    chunks: list[ChunkRow]
    next_offset: int | None


class DeleteResult(TypedDict):
    id: str
    deleted: bool
    error: str


class ItemDeleteAnswer(TypedDict):
    """DELETE /context's data."""

    success: bool
    message: str
    deleted_count: int
    user_memory_deleted: int
    results: list[DeleteResult]


class ItemMetadataAnswer(TypedDict):
    """PATCH /context/{id}/metadata's data: the keys merged and the chunks that took them."""

    id: str
    database: str
    collection: str
    tenant_id: str
    sub_tenant_id: str
    updated: bool
    database_metadata_keys: list[str]
    tenant_metadata_keys: list[str]
    additional_metadata_keys: list[str]
    vector_sync_required: bool
    vector_synced: bool
    vector_rows_synced: int
    chunk_rows_matched: int
    chunk_rows_modified: int


def item_row(ref: ItemRef, d: ItemRecord) -> ListedItem:
    """An item's row in a listing, from its record."""
    row: ItemRow = {
        "id": ref.item_id,
        "title": d["title"] or "",
        "type": d["source_type"],
        "database": ref.database,
        "collection": ref.collection,
        "tenant_id": ref.database,
        "sub_tenant_id": ref.collection,
        "metadata": d["metadata"] or {},
        "additional_metadata": d["additional_metadata"] or {},
        "indexing_status": d["status"],
        "error_code": d["error_code"] or "",
        "chunk_count": d["chunk_count"],
        "created_at": iso(float(d["created_at"] or 0)),
        "updated_at": iso(float(d["updated_at"] or 0)),
        # RFC 3339 like the reference's search.SourceInfo; relation evidence inside listings stays epoch (spec)
        "timestamp": iso(float(d["timestamp"])) if d["timestamp"] is not None else None,
        "relations": {"ids": d["relations"] or []},
        "relates_to": d["relates_to"] or [],
        "thread_id": d["thread_id"],
        "parent_id": d["parent_id"],
    }
    if d["source_type"] == "file":
        return {**row, "filename": d["filename"], "content_type": d["content_type"], "size_bytes": d["size_bytes"]}
    if d["source_type"] == "app":
        return {**row, "app_kind": d["app_type"], "app_provider": d["provider"], "app_external_id": d["external_id"]}
    return {**row, "user_name": d["user_name"], "infer": bool(d["infer"])}
