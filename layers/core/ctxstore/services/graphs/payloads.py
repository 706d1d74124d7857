"""Where an item's `graph_payload` lives: a blob, with a small reference record.

A payload at the API's limits (5,000 entities, 10,000 relations) is a few megabytes of JSON, far past
DynamoDB's 400 KB item limit, so the record (kind GRAPH_PAYLOAD, one per item) holds only the blob's key
and the counts. The blob sits next to the upload of the version that brought it (`<upload key>.graph.json`),
under the item's blob prefix: deleting the item's, collection's or database's blobs deletes it too.

The spec keeps a payload across re-ingests that send none ("re-ingesting without one reapplies the
stored graph"), so the record keeps pointing at the version that brought it; a new payload replaces the
record, then the old blob goes. Records written inline before this layout are still read as they are.
"""

from __future__ import annotations

import json
from typing import Any

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.domain.items import ItemRef
from ctxstore.ports.blobs import BlobNotFound, BlobStore
from ctxstore.ports.records import Put, RecordStore
from ctxstore.services.items.service import GRAPH_PAYLOAD

SUFFIX = ".graph.json"


def save(
    records: RecordStore, blobs: BlobStore, org: str, ref: ItemRef, upload_key: str, graph: dict[str, Any]
) -> None:
    """Store the payload that arrives with the version whose upload is at `upload_key` (the item's lock held)."""
    previous = records.get(org, GRAPH_PAYLOAD, ref.pk, ref.item_id)
    key = upload_key + SUFFIX
    blobs.put(org, key, json.dumps(graph).encode(), content_type="application/json")
    ref_data = {
        "blob_key": key,
        "entities": len(graph.get("entities") or {}),
        "relations": len(graph.get("relations") or []),
    }
    records.put(org, Put(GRAPH_PAYLOAD, ref.pk, ref.item_id, ref_data))
    old = previous.data.get("blob_key") if previous is not None else None
    if isinstance(old, str) and old != key:
        blobs.delete(org, old)


def load(records: RecordStore, blobs: BlobStore, org: str, ref: ItemRef) -> dict[str, Any] | None:
    """The item's stored payload (`{"entities", "relations"}`), or None when it has none."""
    rec = records.get(org, GRAPH_PAYLOAD, ref.pk, ref.item_id)
    if rec is None:
        return None
    key = rec.data.get("blob_key")
    if not isinstance(key, str):
        return rec.data  # an inline record from before payloads moved to blobs
    try:
        data: dict[str, Any] = json.loads(blobs.get(org, key))
    except BlobNotFound:
        # The record names a blob a purge has just removed: retried, the step then finds the item gone.
        raise StoreUnavailable(f"graph_payload blob of item '{ref.item_id}' is missing") from None
    return data
