"""The item catalog: list, inspect, read the chunks of, delete and update the metadata of stored items."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from ctxstore.domain import metadata_schema as ms
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.ingest_request import ADDITIONAL_METADATA_CAP_BYTES, METADATA_CAP_BYTES
from ctxstore.domain.items import ItemRecord, ItemRef, StoredItem, item_pk, item_record
from ctxstore.ports.blobs import BlobNotFound, BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import ConditionFailed, Put, RecordStore
from ctxstore.ports.search_index import ChunkDoc, SearchIndex
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.databases import DatabaseService
from ctxstore.services.items.catalog_answers import (
    ChunkRow,
    DeleteResult,
    ItemChunksAnswer,
    ItemDeleteAnswer,
    ItemInspectAnswer,
    ItemListAnswer,
    ItemMetadataAnswer,
    ListedItem,
    PickedRow,
    item_row,
)
from ctxstore.services.items.service import GRAPH_PAYLOAD, ITEM, ItemService

MAX_PAGE_SIZE = 500
# Hooks that remove an item's share of other stores (the graphs): (org, ref).
ItemPurger = Callable[[str, ItemRef], None]
# Hooks told of an item's new record after a metadata change (the graphs copy its readers): (org, ref, data).
MetadataListener = Callable[[str, ItemRef, ItemRecord], None]


_RENAMED_ROW_FIELDS = {"app_type": "app_kind", "provider": "app_provider", "external_id": "app_external_id"}


def _row_field_filter(given: Any) -> Any:
    """`filters.source_fields` filters on a row's keys. Rows said `provider`, `app_type`, `external_id` before
    they took the app_* names; a filter may still."""
    return {_RENAMED_ROW_FIELDS.get(k, k): v for k, v in given.items()} if isinstance(given, dict) else given


def _bad(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_PARAMETERS, message)


def _matches(value: Any, wanted: Any) -> bool:
    options = wanted if isinstance(wanted, list) else [wanted]
    if isinstance(value, list):
        return any(v in options for v in value)
    return value in options


class ItemCatalog:
    def __init__(
        self,
        records: RecordStore,
        clock: Clock,
        databases: DatabaseService,
        items: ItemService,
        *,
        blobs: Callable[[], BlobStore],
        search_index: Callable[[], SearchIndex | None],
        purgers: list[ItemPurger] | None = None,
    ) -> None:
        """`blobs`, `search_index`: providers, read only by the paths that open bodies or chunks (on AWS a port
        read builds its boto3 client). The search index is None when CTXSTORE_SEARCH_ENDPOINT is unset on AWS."""
        self._records = records
        self._clock = clock
        self._blobs = blobs
        self._search_index = search_index
        self._databases = databases
        self._items = items
        self._purgers = list(purgers or [])
        self._metadata_listeners: list[MetadataListener] = []

    def add_purger(self, purger: ItemPurger) -> None:
        self._purgers.append(purger)

    def add_metadata_listener(self, listener: MetadataListener) -> None:
        self._metadata_listeners.append(listener)

    def _require_item(
        self, principal: Principal, database: str, collection: str, item_id: str, store: str | None = None
    ) -> tuple[ItemRef, StoredItem]:
        self._databases.require(principal, database)
        if store is not None:
            ref = ItemRef(database, collection, store, item_id)
            rec = self._items.get(principal.org, ref)
            found = (ref, rec) if rec is not None else None
        else:
            found = self._items.find(principal.org, database, collection, item_id)
        if found is None:
            raise ApiError(ErrorCode.SOURCE_NOT_FOUND, f"no source '{item_id}' in this database and collection")
        return found

    # ---- list ------------------------------------------------------------------------------
    def list_items(
        self,
        principal: Principal,
        database: str,
        collection: str,
        store: str,
        *,
        page: int,
        page_size: int,
        ids: list[str] | None,
        filters: dict[str, Any],
        include_fields: list[str] | None,
        contains: str = "",
    ) -> ItemListAnswer:
        """`contains`: only items whose title or id holds this text, case-insensitive (the console's search)."""
        self._databases.require(principal, database)
        needle = contains.strip().casefold()
        if page < 1:
            raise _bad("'page' must be 1 or more")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise _bad(f"'page_size' must be from 1 to {MAX_PAGE_SIZE}")
        md_f = filters.get("metadata") or {}
        amd_f = filters.get("additional_metadata") or filters.get("document_metadata") or {}
        row_f = _row_field_filter(filters.get("source_fields") or {})
        for name, f in (
            ("filters.metadata", md_f),
            ("filters.additional_metadata", amd_f),
            ("filters.source_fields", row_f),
        ):
            if not isinstance(f, dict):
                raise _bad(f"'{name}' must be an object")
        pk = item_pk(database, collection, store)
        wanted = set(ids) if ids else None
        matched: list[tuple[ItemRef, ItemRecord]] = []
        after: str | None = None
        while True:
            chunk = self._records.query(principal.org, ITEM, pk, after=after, limit=1000)
            for r in chunk.records:
                d = item_record(r.data)
                if wanted is not None and r.sk not in wanted:
                    continue
                if needle and needle not in r.sk.casefold() and needle not in str(d["title"] or "").casefold():
                    continue
                if not all(_matches((d["metadata"] or {}).get(k), v) for k, v in md_f.items()):
                    continue
                if not all(_matches((d["additional_metadata"] or {}).get(k), v) for k, v in amd_f.items()):
                    continue
                row = item_row(ItemRef(database, collection, store, r.sk), d)
                if not all(_matches(row.get(k), v) for k, v in row_f.items()):
                    continue
                matched.append((ItemRef(database, collection, store, r.sk), d))
            if chunk.next_after is None:
                break
            after = chunk.next_after
        matched.sort(key=lambda x: (-float(x[1]["created_at"] or 0), x[0].item_id))
        total = len(matched)
        start = (page - 1) * page_size
        rows: list[ListedItem | PickedRow] = []
        for ref, d in matched[start : start + page_size]:
            row = item_row(ref, d)
            if include_fields and store == "knowledge":
                # The scope's legacy names too: the official client's row model requires them.
                keep = {"id", "database", "collection", "tenant_id", "sub_tenant_id", *include_fields}
                rows.append({k: v for k, v in row.items() if k in keep})
            else:
                rows.append(row)
        pages = max(1, math.ceil(total / page_size))
        return {
            "success": True,
            "message": "Success",
            "sources": rows,
            "total": total,
            "pagination": {
                "page": page,
                "page_size": page_size,
                "total": total,
                "total_pages": pages,
                "has_next": page < pages,
                "has_previous": page > 1,
            },
        }

    # ---- inspect ---------------------------------------------------------------------------
    def inspect(
        self,
        principal: Principal,
        database: str,
        collection: str,
        item_id: str,
        *,
        mode: str,
        expiry_seconds: int,
        url_for: Callable[[str, str, int, str, str], str],
    ) -> ItemInspectAnswer:
        if mode not in ("content", "url", "both"):
            raise _bad("'mode' must be content, url or both")
        if not 1 <= expiry_seconds <= 7 * 86400:
            raise _bad("'expiry_seconds' must be from 1 to 604800")
        ref, rec = self._require_item(principal, database, collection, item_id)
        d = rec.data
        key = str(d["blob_key"] or "")
        try:
            size = self._blobs().size(principal.org, key)
        except BlobNotFound:
            size = 0
        ctype = str(
            d["content_type"] or ("application/json" if d["source_type"] != "file" else "application/octet-stream")
        )
        out: ItemInspectAnswer = {
            "id": item_id,
            "success": True,
            "message": "Success",
            "error": "",
            "title": d["title"] or "",
            "type": d["source_type"],
            "indexing_status": d["status"],
            "content_type": ctype,
            "size_bytes": size,
        }
        if mode in ("content", "both"):
            out["content"] = self._content_text(principal.org, ref, d)
            out["inferred_content"] = self._inferred(principal.org, ref)
        if mode in ("url", "both"):
            filename = str(d["filename"] or d["title"] or item_id)
            out["presigned_url"] = url_for(principal.org, key, expiry_seconds, filename, ctype)
            out["expires_in"] = expiry_seconds
        return out

    def _content_text(self, org: str, ref: ItemRef, d: ItemRecord) -> str:
        chunks = self._chunks(org, ref)
        if chunks:
            return "\n\n".join(
                c.text
                for c in chunks
                if c.title != "__inferred__" and not c.text.startswith("Inferred from conversation: ")
            )
        if d["source_type"] != "file":
            try:
                body = json.loads(self._blobs().get(org, str(d["blob_key"])))
            except (BlobNotFound, ValueError):
                return ""
            if body.get("pairs"):
                return "\n\n".join(f"User: {p['user']}\nAssistant: {p['assistant']}" for p in body["pairs"])
            return str(body.get("text") or "")
        return ""

    def opening_words(
        self, principal: Principal, database: str, collection: str, store: str, item_ids: list[str], words: int = 8
    ) -> dict[str, str]:
        """The first words of untitled memories and app items (what they say, rather than their ids), read from
        their stored bodies: one blob read each, for the rows a page shows."""
        out: dict[str, str] = {}
        for item_id in item_ids:
            rec = self._items.get(principal.org, ItemRef(database, collection, store, item_id))
            if rec is None or rec.data["title"] or rec.data["source_type"] == "file":
                continue
            try:
                body = json.loads(self._blobs().get(principal.org, str(rec.data["blob_key"])))
            except (BlobNotFound, ValueError):
                continue
            pairs = body.get("pairs") if isinstance(body, dict) else None
            text = (
                " ".join(str(p.get("user") or p.get("assistant") or "") for p in pairs[:1])
                if pairs
                else str(body.get("text") or "" if isinstance(body, dict) else "")
            )
            said = text.split()
            if said:
                out[item_id] = " ".join(said[:words]) + (" …" if len(said) > words else "")
        return out

    def _inferred(self, org: str, ref: ItemRef) -> str:
        return "\n".join(
            c.text.removeprefix("Inferred from conversation: ")
            for c in self._chunks(org, ref)
            if c.text.startswith("Inferred from conversation: ")
        )

    def _chunks(self, org: str, ref: ItemRef) -> list[ChunkDoc]:
        idx = self._search_index()
        if idx is None:  # real: no search index on this deployment, so no chunks
            return []
        return sorted(
            idx.item_chunks(org, ref.database, ref.collection, ref.store, ref.item_id),  # type: ignore[arg-type]
            key=lambda c: c.position,
        )

    # ---- chunks ----------------------------------------------------------------------------
    def chunks(
        self,
        principal: Principal,
        database: str,
        collection: str,
        item_id: str,
        store: str | None,
        *,
        offset: int,
        limit: int,
    ) -> ItemChunksAnswer:
        if not 1 <= limit <= 1000 or offset < 0:
            raise _bad("'limit' must be from 1 to 1000 and 'offset' 0 or more")
        ref, rec = self._require_item(principal, database, collection, item_id, store)
        all_chunks = self._chunks(principal.org, ref)
        page = all_chunks[offset : offset + limit]
        return {
            "id": item_id,
            "type": ref.store,
            "indexing_status": rec.data["status"],
            "total": len(all_chunks),
            "chunks": [
                ChunkRow(
                    chunk_id=c.chunk_id,
                    position=c.position,
                    text=c.text,
                    title=c.title,
                    metadata=c.metadata,
                    additional_metadata=c.additional_metadata,
                )
                for c in page
            ],
            "next_offset": offset + limit if offset + limit < len(all_chunks) else None,
        }

    # ---- delete ----------------------------------------------------------------------------
    def delete(
        self, principal: Principal, database: str, collection: str, store: str, ids: list[str]
    ) -> ItemDeleteAnswer:
        self._databases.require(principal, database)
        if not ids:
            raise _bad("'ids' must list at least one id")
        results: list[DeleteResult] = []
        for item_id in dict.fromkeys(ids):
            ref = ItemRef(database, collection, store, item_id)
            # Under the item's lock: an in-flight version either wrote before (and is purged now) or finds the
            # record gone afterwards and writes nothing, so nothing of the item stays findable.
            with self._items.lock(principal.org, ref):
                if self._items.get(principal.org, ref) is None:
                    results.append({"id": item_id, "deleted": False, "error": "not found"})
                    continue
                self.purge_item(principal.org, ref)
            results.append({"id": item_id, "deleted": True, "error": ""})
        deleted = sum(1 for r in results if r["deleted"])
        return {
            "success": deleted == len(results),
            "message": f"{deleted} deleted",
            "deleted_count": deleted,
            "user_memory_deleted": deleted if store == "memory" else 0,
            "results": results,
        }

    def purge_item(self, org: str, ref: ItemRef) -> None:
        """Remove an item from every store: chunks and vectors, graphs, blobs, then its record."""
        idx = self._search_index()
        if idx is not None:  # real: no search index on this deployment, nothing indexed to delete
            idx.delete_item(
                org,
                ref.database,
                ref.collection,
                ref.store,  # type: ignore[arg-type]
                ref.item_id,
            )
        for purge in self._purgers:
            purge(org, ref)
        prefix = f"{rk.blob_scope_prefix(ref.database, ref.collection)}{ref.store}/{quote(ref.item_id, safe='')}/"
        self._blobs().delete_prefix(org, prefix)
        self._records.delete(org, GRAPH_PAYLOAD, ref.pk, ref.item_id)
        self._records.delete(org, ITEM, ref.pk, ref.item_id)

    # ---- metadata --------------------------------------------------------------------------
    def update_metadata(
        self,
        principal: Principal,
        database: str,
        collection: str,
        item_id: str,
        database_metadata: Any,
        additional_metadata: Any,
    ) -> ItemMetadataAnswer:
        if database_metadata is None and additional_metadata is None:
            raise _bad("send 'database_metadata' and/or 'additional_metadata'")
        for name, value, cap in (
            ("database_metadata", database_metadata, METADATA_CAP_BYTES),
            ("additional_metadata", additional_metadata, ADDITIONAL_METADATA_CAP_BYTES),
        ):
            if value is not None:
                if not isinstance(value, dict):
                    raise _bad(f"'{name}' must be an object")
                size = len(json.dumps(value, separators=(",", ":")).encode())
                if size > cap:
                    raise _bad(f"'{name}' is {size} bytes; the limit is {cap} bytes")
        db = self._databases.require(principal, database)
        schema = [ms.parse_field(f, "schema") for f in db.data.get("metadata_schema", [])]
        if database_metadata:
            ms.validate_metadata(schema, database_metadata, "database_metadata")
        ref, _ = self._require_item(principal, database, collection, item_id)
        # The lock orders concurrent merges and the pipeline's index step, so every chunk ends with the
        # record's merged metadata (each PATCH writes what the record holds after its own merge).
        with self._items.lock(principal.org, ref):
            return self._merge_metadata(principal, ref, database_metadata, additional_metadata)

    def _merge_metadata(
        self, principal: Principal, ref: ItemRef, database_metadata: Any, additional_metadata: Any
    ) -> ItemMetadataAnswer:
        database, collection, item_id = ref.database, ref.collection, ref.item_id
        rec = self._items.get(principal.org, ref)
        if rec is None:
            raise ApiError(ErrorCode.SOURCE_NOT_FOUND, f"source '{item_id}' was deleted")
        for _ in range(10):
            d = rec.data
            md = {**(d["metadata"] or {}), **(database_metadata or {})}
            amd = {**(d["additional_metadata"] or {}), **(additional_metadata or {})}
            try:
                self._records.put(
                    principal.org,
                    Put(
                        ITEM,
                        ref.pk,
                        ref.item_id,
                        {**d, "metadata": md, "additional_metadata": amd, "updated_at": self._clock.now()},
                        if_version=rec.version,
                    ),
                )
                break
            except ConditionFailed:
                fresh = self._items.get(principal.org, ref)
                if fresh is None:
                    raise ApiError(ErrorCode.SOURCE_NOT_FOUND, f"source '{item_id}' was deleted") from None
                rec = fresh
        for listener in self._metadata_listeners:
            listener(principal.org, ref, {**rec.data, "metadata": md, "additional_metadata": amd})
        chunks = self._chunks(principal.org, ref)
        idx = self._search_index()
        if chunks and idx is not None:  # chunks come only from an index: the check is for mypy
            idx.upsert(principal.org, [replace(c, metadata=md, additional_metadata=amd) for c in chunks])
        return {
            "id": item_id,
            "database": database,
            "collection": collection,
            "tenant_id": database,
            "sub_tenant_id": collection,
            "updated": True,
            "database_metadata_keys": sorted((database_metadata or {}).keys()),
            "tenant_metadata_keys": sorted((database_metadata or {}).keys()),
            "additional_metadata_keys": sorted((additional_metadata or {}).keys()),
            "vector_sync_required": bool(chunks),
            "vector_synced": bool(chunks),
            "vector_rows_synced": len(chunks),
            "chunk_rows_matched": len(chunks),
            "chunk_rows_modified": len(chunks),
        }
