"""Item records: one per ingested item, carrying its indexing status. Status changes emit events."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TypedDict

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.items import STORES, ItemRecord, ItemRef, ItemStatus, StoredItem, item_record
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import ConditionFailed, Put, RecordStore
from ctxstore.services.items.locks import REQUEST_WAIT_SECONDS, ItemLocks
from ctxstore.services.webhooks.events import INDEXING_STATUS_CHANGED, EventSink

ITEM = "item"
GRAPH_PAYLOAD = "graph_payload"


class StatusExtra(TypedDict, total=False):
    """What a status change writes besides the status: the chunk count when searchable, relations when done."""

    chunk_count: int
    relations_created: int


@dataclass(frozen=True)
class StatusChange:
    ref: ItemRef
    version: str
    status: ItemStatus
    extra: StatusExtra = field(default_factory=lambda: StatusExtra())


def new_version() -> str:
    """Time-ordered, so a job can tell a newer ingest of its item from an older one."""
    return f"{time.time_ns():020d}-{os.urandom(4).hex()}"


class ItemService:
    def __init__(
        self, records: RecordStore, clock: Clock, *, events: Callable[[], EventSink], single_process: bool = True
    ) -> None:
        """`events`: a provider, read on each status change (the webhook service is the sink, built on its first
        emit). `single_process`: the item locks may live in this process's memory (Capabilities.single_process)."""
        self._records = records
        self._clock = clock
        self._events = events
        self._locks = ItemLocks(records, single_process=single_process)

    def lock(self, org: str, ref: ItemRef, *, wait_s: float = REQUEST_WAIT_SECONDS) -> AbstractContextManager[None]:
        """Hold the item's write lock (services/item_locks.py) for a check-then-write on its derived data."""
        return self._locks.hold(org, ref.pk, ref.item_id, wait_s=wait_s)

    def lock_many(
        self, org: str, refs: Sequence[ItemRef], *, wait_s: float = REQUEST_WAIT_SECONDS
    ) -> AbstractContextManager[None]:
        """Hold several items' write locks at once (an ingestion worker's batch)."""
        return self._locks.hold_many(org, [(ref.pk, ref.item_id) for ref in refs], wait_s=wait_s)

    def get(self, org: str, ref: ItemRef) -> StoredItem | None:
        rec = self._records.get(org, ITEM, ref.pk, ref.item_id)
        return StoredItem(item_record(rec.data), rec.version) if rec is not None else None

    def get_many(self, org: str, refs: Sequence[ItemRef]) -> dict[ItemRef, StoredItem]:
        """get() for items of any collections, in one read of the records."""
        recs = self._records.get_many(org, ITEM, [(ref.pk, ref.item_id) for ref in refs])
        found = {ref: recs.get((ref.pk, ref.item_id)) for ref in refs}
        return {ref: StoredItem(item_record(rec.data), rec.version) for ref, rec in found.items() if rec is not None}

    def find(self, org: str, database: str, collection: str, item_id: str) -> tuple[ItemRef, StoredItem] | None:
        """Look an id up in both stores of a collection."""
        for store in STORES:
            ref = ItemRef(database, collection, store, item_id)
            rec = self.get(org, ref)
            if rec is not None:
                return ref, rec
        return None

    def find_many(
        self, org: str, database: str, collection: str, item_ids: Sequence[str]
    ) -> dict[str, tuple[ItemRef, StoredItem]]:
        """find() for many ids: one batched read per store, the second only for the ids the first missed."""
        found: dict[str, tuple[ItemRef, StoredItem]] = {}
        for store in STORES:
            refs = {i: ItemRef(database, collection, store, i) for i in dict.fromkeys(item_ids) if i not in found}
            if not refs:
                break
            recs = self._records.get_many(org, ITEM, [(ref.pk, ref.item_id) for ref in refs.values()])
            for item_id, ref in refs.items():
                rec = recs.get((ref.pk, item_id))
                if rec is not None:
                    found[item_id] = ref, StoredItem(item_record(rec.data), rec.version)
        return found

    def set_status(
        self,
        org: str,
        ref: ItemRef,
        version: str,
        status: ItemStatus,
        *,
        error_code: str | None = None,
        error_message: str | None = None,
        extra: StatusExtra | None = None,
    ) -> bool:
        """Move the item to `status` if it is still at `version`; False if a newer ingest replaced it."""
        for _ in range(10):
            rec = self.get(org, ref)
            if rec is None or rec.data["version"] != version:
                return False
            previous = rec.data["status"]
            data = self._with_status(rec, status, error_code, error_message, extra)
            try:
                self._records.put(org, Put(ITEM, ref.pk, ref.item_id, data, if_version=rec.version))
            except ConditionFailed:
                continue  # a concurrent update of the same record; read again
            if previous != status:
                self.emit_status(org, ref, data, previous)
            return True
        return False

    def set_statuses(self, org: str, changes: Sequence[StatusChange]) -> list[bool]:
        """set_status for several items in one conditional write; per item when that write's conditions
        fail (one was replaced or updated meanwhile). True for each item moved."""
        puts: list[Put] = []
        moved: list[tuple[StatusChange, ItemRecord, ItemStatus]] = []
        for change in changes:
            rec = self.get(org, change.ref)
            if rec is None or rec.data["version"] != change.version:
                break
            data = self._with_status(rec, change.status, None, None, change.extra)
            puts.append(Put(ITEM, change.ref.pk, change.ref.item_id, data, if_version=rec.version))
            moved.append((change, data, rec.data["status"]))
        if len(puts) == len(changes):
            try:
                self._records.transact(org, puts)
            except ConditionFailed:
                pass
            else:
                for change, data, previous in moved:
                    if previous != change.status:
                        self.emit_status(org, change.ref, data, previous)
                return [True] * len(changes)
        return [self.set_status(org, c.ref, c.version, c.status, extra=c.extra) for c in changes]

    def _with_status(
        self,
        rec: StoredItem,
        status: ItemStatus,
        error_code: str | None,
        error_message: str | None,
        extra: StatusExtra | None,
    ) -> ItemRecord:
        return {
            **rec.data,
            "status": status,
            "updated_at": self._clock.now(),
            "error_code": error_code,
            "error_message": error_message,
            **(extra or StatusExtra()),
        }

    def emit_status(self, org: str, ref: ItemRef, data: ItemRecord, previous: ItemStatus | None) -> None:
        self._events().emit(
            org,
            INDEXING_STATUS_CHANGED,
            {
                "id": ref.item_id,
                "doc_id": ref.item_id,
                "database": ref.database,
                "collection": ref.collection,
                "type": ref.store,
                "indexing_status": data["status"],
                "previous_status": previous,
                "error_code": data["error_code"] or "",
                "error_message": data["error_message"] or "",
                "timestamp": iso(self._clock.now()),
            },
        )
