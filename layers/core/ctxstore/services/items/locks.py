"""One writer at a time for everything derived from one item: its chunks, vectors, keywords, graph share.

Ingest acceptance, the pipeline's index and graph steps, a metadata PATCH and a DELETE each hold the
item's lock while they check the item record and write. Under the lock the record is the truth: a job
whose version is no longer the record's (replaced or deleted) writes nothing, so a delete wins over any
in-flight version, the newest accepted version wins whole, and metadata merges cannot interleave.

The lock is a record with a lease (`expires_at`) written with `if_absent`, so it works the same on SQLite
and on DynamoDB (a conditional put): a holder that dies frees the item when the lease runs out. The lease
is far longer than any single step holds it (seconds), and a waiter that cannot get it in time raises
StoreUnavailable: 503 with Retry-After for a request, a retry with backoff for a pipeline step.

Locally one process owns the data dir (a second server refuses to start), so a lock written by an earlier
process (one killed with -9) is stale at once: it carries the writer's boot id and is taken over instead of
waited out. On AWS many Lambdas share the table and only the lease frees a dead holder's lock.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.records import ConditionFailed, Delete, Put, RecordStore

ITEM_LOCK = "item_lock"  # org: pk = the item's pk, sk = item id
BOOT_ID = os.urandom(8).hex()  # this process
LEASE_SECONDS = 300.0
REQUEST_WAIT_SECONDS = 20.0  # an HTTP request waits at most this long, then answers 503
STEP_WAIT_SECONDS = 60.0  # a pipeline step waits at most this long, then retries later


class ItemLocks:
    def __init__(self, records: RecordStore, *, lease_s: float = LEASE_SECONDS, single_process: bool = False) -> None:
        self._records = records
        self._lease_s = lease_s
        self._single_process = single_process

    @contextlib.contextmanager
    def hold(self, org: str, pk: str, item_id: str, *, wait_s: float = REQUEST_WAIT_SECONDS) -> Iterator[None]:
        owner = os.urandom(8).hex()
        version = self._acquire(org, pk, item_id, owner, wait_s)
        try:
            yield
        finally:
            self._release(org, pk, item_id, owner, version)

    @contextlib.contextmanager
    def hold_many(
        self, org: str, keys: Sequence[tuple[str, str]], *, wait_s: float = REQUEST_WAIT_SECONDS
    ) -> Iterator[None]:
        """Hold several items' locks (a worker's batch): one conditional write for all when none is taken,
        else one at a time in key order, so two batch holders cannot wait on each other in a cycle
        (single holders never wait while holding)."""
        owner = os.urandom(8).hex()
        ordered = sorted(set(keys))
        held: list[tuple[str, str]] = []
        try:
            if not self._acquire_all(org, ordered, owner):
                for pk, item_id in ordered:
                    self._acquire(org, pk, item_id, owner, wait_s)
                    held.append((pk, item_id))
            held = ordered
            yield
        finally:
            self._release_all(org, held, owner)

    def _acquire_all(self, org: str, keys: Sequence[tuple[str, str]], owner: str) -> bool:
        data = {"owner": owner, "boot": BOOT_ID}
        expires = time.time() + self._lease_s
        try:
            self._records.transact(
                org, [Put(ITEM_LOCK, pk, item_id, data, if_absent=True, expires_at=expires) for pk, item_id in keys]
            )
        except ConditionFailed:
            return False  # one is held (or stale): nothing was written
        return True

    def _release_all(self, org: str, keys: Sequence[tuple[str, str]], owner: str) -> None:
        ours = []
        for pk, item_id in keys:
            rec = self._records.get(org, ITEM_LOCK, pk, item_id)
            if rec is not None and rec.data.get("owner") == owner:
                ours.append(Delete(ITEM_LOCK, pk, item_id, if_version=rec.version))
        try:
            self._records.transact(org, ours)
        except ConditionFailed:  # one lease ran out and changed hands meanwhile: release the others one by one
            for op in ours:
                with contextlib.suppress(ConditionFailed):
                    self._records.delete(org, op.kind, op.pk, op.sk, if_version=op.if_version)

    def _acquire(self, org: str, pk: str, item_id: str, owner: str, wait_s: float) -> int:
        deadline = time.monotonic() + wait_s
        pause = 0.002
        data = {"owner": owner, "boot": BOOT_ID}
        while True:
            put = Put(ITEM_LOCK, pk, item_id, data, if_absent=True, expires_at=time.time() + self._lease_s)
            try:
                return self._records.put(org, put).version
            except ConditionFailed:
                pass
            taken = self._take_over_stale(org, pk, item_id, data)
            if taken is not None:
                return taken
            if time.monotonic() >= deadline:
                raise StoreUnavailable(f"item '{item_id}' is busy with another write; retry shortly")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _take_over_stale(self, org: str, pk: str, item_id: str, data: dict[str, str]) -> int | None:
        if not self._single_process:
            return None
        held = self._records.get(org, ITEM_LOCK, pk, item_id)
        if held is None or held.data.get("boot") == BOOT_ID:
            return None
        put = Put(ITEM_LOCK, pk, item_id, data, if_version=held.version, expires_at=time.time() + self._lease_s)
        try:
            return self._records.put(org, put).version
        except ConditionFailed:
            return None  # someone else moved first; wait as usual

    def _release(self, org: str, pk: str, item_id: str, owner: str, version: int) -> None:
        rec = self._records.get(org, ITEM_LOCK, pk, item_id)
        if rec is None or rec.data.get("owner") != owner:
            return  # our lease ran out and someone else holds it now: theirs to release
        with contextlib.suppress(ConditionFailed):
            self._records.delete(org, ITEM_LOCK, pk, item_id, if_version=rec.version)
