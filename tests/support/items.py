"""A complete item record for tests that write one directly (as services/items/ingest.py writes it)."""

from __future__ import annotations

from typing import Any

from ctxstore.domain.items import ItemRecord


def item_record(item_id: str, **fields: Any) -> ItemRecord:
    """A completed app item of the knowledge store in `database` "" (override any key with `fields`)."""
    record: ItemRecord = {
        "id": item_id,
        "store": "knowledge",
        "source_type": "app",
        "title": item_id,
        "filename": None,
        "content_type": None,
        "size_bytes": None,
        "ext": None,
        "app_type": None,
        "provider": None,
        "external_id": None,
        "metadata": {},
        "additional_metadata": {},
        "relations": [],
        "relates_to": [],
        "thread_id": None,
        "parent_id": None,
        "timestamp": 1.0,
        "infer": False,
        "user_name": None,
        "version": "v1",
        "blob_key": f"blobs/{item_id}",
        "status": "completed",
        "error_code": None,
        "error_message": None,
        "chunk_count": 1,
        "created_at": 1.0,
        "updated_at": 1.0,
        "database": "",
        "collection": "",
    }
    return {**record, **fields}  # type: ignore[typeddict-item]
