"""Synced objects into items: the same ingest service as `POST /context/ingest`, the same delete as `DELETE /context`.

Per object the index (`connector_object`, keyed by native id) holds the item id, where it went and a hash
of everything ingested; an object whose hash is unchanged is not ingested again. Order for crash safety:
ingest (durable once accepted), then the index, then the resource's checkpoint (store.py), so a crash
re-reads at most one page and re-ingests nothing that was recorded.

Item shape: `app_knowledge` with deterministic id (domain/connector_rules.py), `provider`, `external_id`
(native id), `type` (object kind), thread/parent/links as `thread_id`/`parent_id`/`relates_to`, and the
system metadata of docs/connectors.md: metadata = resource metadata + `provider`, `connector_id` (system
keys win; undeclared keys are stored, not filterable); additional_metadata = resource additional_metadata +
account details + `connector_id`, `resource_id`, `provider_account_scope`, the provider-native ids, `kind`,
`url`, `author`, and the `custom_instructions` the object was ingested under.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ctxstore.domain.connector_rules import connector_item_id
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.ingest_request import (
    ADDITIONAL_METADATA_CAP_BYTES,
    METADATA_CAP_BYTES,
    IngestRequest,
    ItemSpec,
    Link,
    Upload,
)
from ctxstore.domain.items import TERMINAL, ItemRef
from ctxstore.parsing.formats import classify
from ctxstore.ports.connector_provider import SyncedObject
from ctxstore.services.access.principal import Principal
from ctxstore.services.connectors.store import ConnectorStore
from ctxstore.services.connectors.views import is_active
from ctxstore.services.items.catalog import ItemCatalog
from ctxstore.services.items.ingest import IngestService
from ctxstore.services.items.service import ItemService

SYSTEM_PRINCIPAL_PREFIX = "connector:"
UNINDEXED_CHECK_S = 86400.0  # dispatches older than this are not checked for lifecycle `ingesting`


def unindexed(items: ItemService, org: str, connector: dict[str, Any], now: float) -> bool:
    """Whether an item of the connector's last dispatch is still being indexed (its lifecycle is `ingesting`)."""
    at = connector.get("last_dispatch_at")
    if not isinstance(at, int | float) or now - at > UNINDEXED_CHECK_S:
        return False
    for ref in connector.get("last_dispatched") or []:
        rec = items.get(org, ItemRef(ref["database"], ref["collection"], "knowledge", ref["id"]))
        if rec is not None and rec.data.get("status") not in TERMINAL:
            return True
    return False


class TargetUnavailable(Exception):
    """The resource's database cannot take items (deleted, or the key's access changed): a resource failure."""


@dataclass(frozen=True)
class Target:
    """Where and how one resource's objects are ingested during one chunk (constant for the chunk)."""

    org: str
    connector_id: str
    provider: str
    account_scope: str
    account_details: dict[str, Any]
    resource_id: str
    resource_name: str
    database: str
    collection: str
    metadata: dict[str, Any]
    additional_metadata: dict[str, Any]
    custom_instructions: str
    sync_mode: str

    @property
    def principal(self) -> Principal:
        return Principal(self.org, f"{SYSTEM_PRINCIPAL_PREFIX}{self.connector_id}")

    def item_id(self, native_id: str) -> str:
        return connector_item_id(self.provider, self.account_scope, native_id)


@dataclass
class Staged:
    native_id: str
    spec: ItemSpec
    attachments: list[ItemSpec]
    index: dict[str, Any]


@dataclass
class Batch:
    staged: list[Staged] = field(default_factory=list)
    unchanged: int = 0


@dataclass
class FlushResult:
    dispatched: list[str] = field(default_factory=list)  # item ids handed to ingestion
    failures: list[tuple[str, str]] = field(default_factory=list)  # (native id, message)


def _size(value: dict[str, Any]) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _digest(spec: ItemSpec, attachments: list[ItemSpec]) -> str:
    body = {
        "title": spec.title,
        "text": spec.text,
        "type": spec.app_type,
        "metadata": spec.metadata,
        # Not the provider's update time alone: GitHub bumps an issue's updated_at for every new comment (a
        # separate object), and re-indexing an unchanged text for that would cost an embedding per comment.
        "additional": {k: v for k, v in spec.additional_metadata.items() if k != "updated_at"},
        "links": [[x.target_id, x.relation] for x in spec.links],
        "thread": spec.thread_id,
        "parent": spec.parent_id,
        "ts": spec.timestamp,
        "att": [[a.title, hashlib.sha256(a.upload.data).hexdigest() if a.upload else ""] for a in attachments],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def build_spec(t: Target, obj: SyncedObject) -> tuple[ItemSpec, list[ItemSpec]]:
    """The item (and attachment items) for one object; ValueError when it cannot be ingested."""
    item_id = t.item_id(obj.native_id)
    metadata = {**t.metadata, "provider": t.provider, "connector_id": t.connector_id}
    additional: dict[str, Any] = {
        **t.additional_metadata,
        **t.account_details,
        **obj.native_fields,
        "connector_id": t.connector_id,
        "resource_id": t.resource_id,
        "provider_account_scope": t.account_scope,
        "native_id": obj.native_id,
        "kind": obj.kind,
    }
    for key, value in (("url", obj.url), ("author", obj.author), ("updated_at", obj.updated_at)):
        if value is not None:
            additional[key] = value
    if t.custom_instructions:
        additional["custom_instructions"] = t.custom_instructions
    if _size(metadata) > METADATA_CAP_BYTES or _size(additional) > ADDITIONAL_METADATA_CAP_BYTES:
        raise ValueError("object metadata exceeds the 16 KiB ingest limit")
    links: list[Link] = []
    for link in obj.links:
        target = t.item_id(link.native_id)
        if target != item_id and all(x.target_id != target or x.relation != link.relation for x in links):
            links.append(Link(target, link.relation))
    thread = t.item_id(obj.thread_native_id) if obj.thread_native_id else None
    parent = t.item_id(obj.parent_native_id) if obj.parent_native_id else None
    spec = ItemSpec(
        id=item_id,
        store="knowledge",
        source_type="app",
        title=obj.title,
        text=obj.text or obj.title,
        app_type=obj.kind,
        provider=t.provider,
        external_id=obj.native_id,
        metadata=metadata,
        additional_metadata=additional,
        links=links,
        thread_id=thread,
        parent_id=parent if parent != item_id else None,
        timestamp=obj.created_at,
    )
    attachments: list[ItemSpec] = []
    for i, att in enumerate(obj.attachments):
        ext = classify(att.filename, att.content_type)
        if ext is None:
            continue  # a format ingestion does not accept: the object itself is still synced
        attachments.append(
            ItemSpec(
                id=f"{item_id}~att{i}",
                store="knowledge",
                source_type="file",
                title=att.filename,
                metadata=metadata,
                additional_metadata={**additional, "attachment_of": item_id},
                parent_id=item_id,
                timestamp=obj.created_at,
                upload=Upload(att.filename, att.content_type, att.data),
                ext=ext,
            )
        )
    return spec, attachments


class Dispatcher:
    def __init__(self, store: ConnectorStore, ingest: IngestService, catalog: ItemCatalog) -> None:
        self._store = store
        self._ingest = ingest
        self._catalog = catalog

    def stage(self, t: Target, obj: SyncedObject, batch: Batch, now: float) -> str | None:
        """Add a changed object to the batch; None when staged or unchanged, else a failure message."""
        known = self._store.object(t.org, t.connector_id, t.resource_id, obj.native_id)
        if known is not None and t.sync_mode == "new_only":
            batch.unchanged += 1  # new_only: an object already synced is never re-read for edits
            return None
        try:
            spec, attachments = build_spec(t, obj)
        except ValueError as exc:
            return str(exc)
        digest = _digest(spec, attachments)
        if known is not None and known.data.get("hash") == digest and known.data.get("collection") == t.collection:
            batch.unchanged += 1
            return None
        batch.staged = [s for s in batch.staged if s.native_id != obj.native_id]  # re-yielded in this page
        index = {
            "item_id": spec.id,
            "database": t.database,
            "collection": t.collection,
            "hash": digest,
            "kind": obj.kind,
            "thread": obj.thread_native_id,
            "created_at": obj.created_at if obj.created_at is not None else now,
            "synced_at": now,
            "attachments": [a.id for a in attachments],
        }
        batch.staged.append(Staged(obj.native_id, spec, attachments, index))
        return None

    def flush(self, t: Target, batch: Batch) -> FlushResult:
        """Ingest the staged objects (one request), then record them in the index."""
        result = FlushResult()
        staged, batch.staged = batch.staged, []
        if not staged:
            return result
        try:
            accepted = self._accept(t, staged)
        except ApiError as exc:
            if exc.code in (ErrorCode.DATABASE_NOT_FOUND, ErrorCode.FORBIDDEN):
                raise TargetUnavailable(exc.message) from exc
            accepted = []  # one object broke a rule for the whole request: find which, one at a time
            for s in staged:
                try:
                    accepted.extend(self._accept(t, [s]))
                except ApiError as one:
                    result.failures.append((s.native_id, one.message))
        for s, error in accepted:
            if error:
                result.failures.append((s.native_id, error))
                continue
            self._store.put_object(t.org, t.connector_id, t.resource_id, s.native_id, s.index)
            result.dispatched.append(s.spec.id)
        return result

    def _accept(self, t: Target, staged: list[Staged]) -> list[tuple[Staged, str]]:
        specs = [x for s in staged for x in (s.spec, *s.attachments)]
        req = IngestRequest(
            store="knowledge",
            database=t.database,
            collection=t.collection,
            upsert=True,
            items=specs,
            graphs={},
            undeclared_metadata="keep",
        )
        out = self._ingest.accept(t.principal, req)
        by_id = {r["id"]: r for r in out["results"]}
        accepted: list[tuple[Staged, str]] = []
        for s in staged:
            r = by_id.get(s.spec.id)
            ok = r is not None and r["status"] == "queued"
            accepted.append((s, "" if ok else str((r and r["error"]) or "not accepted by ingestion")))
        return accepted

    def _held_elsewhere(self, t: Target, others: list[str], native_id: str, database: str, collection: str) -> bool:
        """Whether another active resource of the connector still holds the same item (a mail in two labels)."""
        for resource_id in others:
            rec = self._store.object(t.org, t.connector_id, resource_id, native_id)
            if rec is not None and (rec.data.get("database"), rec.data.get("collection")) == (database, collection):
                return True
        return False

    def delete(self, t: Target, native_ids: Iterable[str]) -> int:
        """Delete the items of objects gone at the provider (the DELETE /context path) and forget them.

        An object one resource lets go of while another active resource of the same connector still holds it
        (same item: the id derives from the native id) is only forgotten by this resource; the last one to
        let go deletes the item."""
        deleted = 0
        others: list[str] | None = None
        for native_id in native_ids:
            known = self._store.object(t.org, t.connector_id, t.resource_id, native_id)
            database = str(known.data["database"]) if known else t.database
            collection = str(known.data["collection"]) if known else t.collection
            if others is None:
                others = [
                    r.sk
                    for r in self._store.resources(t.org, t.connector_id)
                    if r.sk != t.resource_id and is_active(r.data)
                ]
            if others and self._held_elsewhere(t, others, native_id, database, collection):
                if known is not None:
                    self._store.delete_object(t.org, t.connector_id, t.resource_id, native_id)
                continue
            ids = [str(known.data["item_id"]) if known else t.item_id(native_id)]
            if known is not None:
                ids.extend(str(a) for a in known.data.get("attachments") or [])
            try:
                out = self._catalog.delete(t.principal, database, collection, "knowledge", ids)
                deleted += int(out["deleted_count"] > 0)
            except ApiError as exc:
                if exc.code is not ErrorCode.DATABASE_NOT_FOUND:
                    raise
            if known is not None:
                self._store.delete_object(t.org, t.connector_id, t.resource_id, native_id)
        return deleted
