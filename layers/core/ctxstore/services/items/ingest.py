"""Accepting an ingest request: everything validated first, then each item stored durably and started."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict
from urllib.parse import quote

from ctxstore.domain import metadata_schema as ms
from ctxstore.domain.errors import ApiError, ErrorCode, StoreUnavailable
from ctxstore.domain.ingest_request import IngestRequest, ItemSpec
from ctxstore.domain.items import QUEUED, ItemRecord, ItemRef, StoredItem
from ctxstore.ports.blobs import BlobPut, BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import ConditionFailed, Put, RecordStore
from ctxstore.ports.workflow import WorkflowStarter
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.databases import DatabaseService
from ctxstore.services.graphs import payloads as graph_payloads
from ctxstore.services.items.service import ITEM, ItemService, new_version
from ctxstore.services.items.uploads import UploadService


class ItemResult(TypedDict):
    """One item's outcome in the ingest answer (queued, or failed with the reason)."""

    id: str
    filename: str | None
    title: str
    status: str
    error: str | None
    error_code: str | None
    infer: bool
    relations_created: int
    relations_error: str


class IngestAnswer(TypedDict):
    """POST /context/ingest's data (202)."""

    success: bool
    message: str
    success_count: int
    failed_count: int
    results: list[ItemResult]


def blob_key(ref: ItemRef, version: str) -> str:
    # The id is percent-encoded into one segment so that "a" never shares a prefix folder with "a/b".
    return f"{rk.blob_scope_prefix(ref.database, ref.collection)}{ref.store}/{quote(ref.item_id, safe='')}/{version}"


def _payload(spec: ItemSpec) -> tuple[bytes, str | None]:
    """What the pipeline will read back: the original file, or the item's own content as JSON."""
    if spec.upload is not None:
        return spec.upload.data, spec.upload.content_type
    body = {"text": spec.text, "pairs": spec.pairs, "title": spec.title, "user_name": spec.user_name}
    return json.dumps(body).encode(), "application/json"


def _record(spec: ItemSpec, ref: ItemRef, version: str, key: str, now: float, created_at: float) -> ItemRecord:
    return {
        "id": spec.id,
        "store": spec.store,
        "source_type": spec.source_type,
        "title": spec.title,
        "filename": spec.upload.filename if spec.upload else None,
        "content_type": spec.upload.content_type if spec.upload else None,
        "size_bytes": len(spec.upload.data) if spec.upload else None,
        "ext": spec.ext,
        "app_type": spec.app_type,
        "provider": spec.provider,
        "external_id": spec.external_id,
        "metadata": spec.metadata,
        "additional_metadata": spec.additional_metadata,
        "relations": spec.relations,
        "relates_to": [{"id": link.target_id, "relation": link.relation} for link in spec.links],
        "thread_id": spec.thread_id,
        "parent_id": spec.parent_id,
        "timestamp": spec.timestamp if spec.timestamp is not None else created_at,
        "infer": spec.infer,
        "user_name": spec.user_name,
        "version": version,
        "blob_key": key,
        "status": QUEUED,
        "error_code": None,
        "error_message": None,
        "chunk_count": 0,
        "created_at": created_at,
        "updated_at": now,
        "database": ref.database,
        "collection": ref.collection,
    }


def _versioned(
    spec: ItemSpec, ref: ItemRef, version: str, key: str, now: float, previous: StoredItem | None
) -> tuple[ItemRecord, Put]:
    """The new version's record and its write over `previous` (absent, or at that record version)."""
    record = _record(spec, ref, version, key, now, previous.data["created_at"] if previous else now)
    put = Put(
        ITEM,
        ref.pk,
        ref.item_id,
        record,
        if_absent=previous is None,
        if_version=previous.version if previous is not None else None,
    )
    return record, put


ACCEPT_GROUP = 50  # items written together; a DynamoDB transaction holds at most 100 operations


@dataclass(frozen=True)
class _Staged:
    """An item of a group whose blob is stored, waiting for its job and record."""

    index: int  # in the group
    spec: ItemSpec
    ref: ItemRef
    version: str
    key: str
    previous: StoredItem | None


def _result(req: IngestRequest, spec: ItemSpec) -> ItemResult:
    graph = req.graphs.get(spec.id)
    return {
        "id": spec.id,
        "filename": spec.upload.filename if spec.upload else None,
        "title": spec.title,
        "status": QUEUED,
        "error": None,
        "error_code": None,
        "infer": spec.infer,
        "relations_created": len(graph.relations) if graph else 0,
        "relations_error": "",
    }


def _failed(result: ItemResult, error: str, code: str) -> ItemResult:
    return {**result, "status": "failed", "error": error, "error_code": code}


def _exists(result: ItemResult, spec: ItemSpec) -> ItemResult:
    return _failed(result, f"an item with id '{spec.id}' already exists", "CONFLICT")


def _execution(ref: ItemRef, version: str) -> str:
    return f"ingest{rk.SEP}{ref.pk}{rk.SEP}{ref.item_id}{rk.SEP}{version}"


def _job(ref: ItemRef, version: str) -> dict[str, Any]:
    return {"ref": ref.to_json(), "version": version}


class IngestService:
    def __init__(
        self,
        records: RecordStore,
        clock: Clock,
        databases: DatabaseService,
        items: ItemService,
        *,
        blobs: Callable[[], BlobStore],
        workflow: Callable[[], WorkflowStarter | None],
    ) -> None:
        """`blobs`, `workflow`: providers, read only when an ingest is accepted (the connector service
        builds this service too; on AWS a port read builds its boto3 client)."""
        self._records = records
        self._clock = clock
        self._databases = databases
        self._items = items
        self._blobs = blobs
        self._workflow = workflow
        # large files arrive by reference (POST /context/uploads)
        self.uploads = UploadService(records, clock, blobs)

    def accept(self, principal: Principal, req: IngestRequest) -> IngestAnswer:
        workflow = self._workflow()
        if workflow is None:  # real: an AWS function with neither ingest queue nor state machine configured
            raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "ingestion is not configured on this deployment")
        db = self._databases.require(principal, req.database)
        schema = [ms.parse_field(f, "schema") for f in db.data.get("metadata_schema", [])]
        org = principal.org
        declared = {f.name for f in schema}
        for i, spec in enumerate(req.items):
            where = f"items[{i}] ({spec.id}).metadata"
            if req.undeclared_metadata == "keep":  # declared keys are still type-checked
                checked = {k: v for k, v in spec.metadata.items() if k in declared}
                spec.metadata = {**spec.metadata, **ms.validate_metadata(schema, checked, where)}
            else:
                spec.metadata = ms.validate_metadata(schema, spec.metadata, where)
        if not req.upsert:
            for spec in req.items:
                if spec.rejected_code is None and self._items.get(org, self._ref(req, spec)) is not None:
                    raise ApiError(ErrorCode.CONFLICT, f"an item with id '{spec.id}' already exists and upsert=false")
        results = self._accept_all(org, req, workflow)
        if any(r["status"] == QUEUED for r in results):
            self._databases.note_collection(principal, req.database, req.collection)
        ok = sum(1 for r in results if r["status"] == QUEUED)
        failed = len(results) - ok
        return {
            "success": failed == 0,
            "message": "all items queued" if failed == 0 else f"{ok} queued, {failed} failed",
            "success_count": ok,
            "failed_count": failed,
            "results": results,
        }

    @staticmethod
    def _ref(req: IngestRequest, spec: ItemSpec) -> ItemRef:
        return ItemRef(req.database, req.collection, spec.store, spec.id)

    def _accept_all(self, org: str, req: IngestRequest, workflow: WorkflowStarter) -> list[ItemResult]:
        """Each item's result, in request order. Items are stored in groups that share one lock write, one
        job start and one record write (item by item, a request of 100 made ~20 SQLite statements and 4
        commits an item, or as many DynamoDB calls on AWS). A request's ids are distinct (parse_ingest)."""
        results = [_result(req, spec) for spec in req.items]
        live = []
        for i, spec in enumerate(req.items):
            if spec.rejected_code:
                results[i] = _failed(results[i], str(spec.rejected_reason), spec.rejected_code)
            else:
                live.append(i)
        for start in range(0, len(live), ACCEPT_GROUP):
            group = live[start : start + ACCEPT_GROUP]
            for i, result in zip(
                group, self._accept_group(org, req, [req.items[i] for i in group], workflow), strict=True
            ):
                results[i] = result
        return results

    def _accept_group(
        self, org: str, req: IngestRequest, specs: list[ItemSpec], workflow: WorkflowStarter
    ) -> list[ItemResult]:
        refs = [self._ref(req, spec) for spec in specs]
        results = [_result(req, spec) for spec in specs]
        with self._items.lock_many(org, refs):  # a DELETE or another version of these ids cannot interleave
            previous = self._items.get_many(org, refs)
            blobs = self._blobs()
            # Order matters for crash safety: blobs, then the jobs, then the records. A job whose record is not
            # written yet waits and retries; a job whose record names a newer version is stale and stops.
            staged = self._store_blobs(org, req, specs, refs, previous, results, blobs)
            workflow.start_many(org, [(_execution(st.ref, st.version), _job(st.ref, st.version)) for st in staged])
            written = self._write_records(org, req, staged)
            for st, outcome in zip(staged, written, strict=True):
                if outcome is None:
                    blobs.delete(org, st.key)
                    results[st.index] = _exists(results[st.index], st.spec)
                elif outcome[1] is not None and outcome[1].data["blob_key"] not in (None, st.key):
                    blobs.delete(org, str(outcome[1].data["blob_key"]))
        for st, outcome in zip(staged, written, strict=True):
            if outcome is not None:
                record, prior = outcome
                self._items.emit_status(org, st.ref, record, prior.data["status"] if prior else None)
        return results

    def _store_blobs(
        self,
        org: str,
        req: IngestRequest,
        specs: list[ItemSpec],
        refs: list[ItemRef],
        previous: dict[ItemRef, StoredItem],
        results: list[ItemResult],
        blobs: BlobStore,
    ) -> list[_Staged]:
        """Each new version's blob (and graph payload), their syncs shared (BlobStore.put_many); an item
        upsert=false finds existing fails here. A failure (a full disk) removes the group's blobs: nothing refers
        to them yet."""
        staged: list[_Staged] = []
        puts: list[BlobPut] = []
        for n, (spec, ref) in enumerate(zip(specs, refs, strict=True)):
            if ref in previous and not req.upsert:
                results[n] = _exists(results[n], spec)
                continue
            version = new_version()
            key = blob_key(ref, version)
            data, ctype = _payload(spec)
            puts.append(BlobPut(key, data, ctype))
            staged.append(_Staged(n, spec, ref, version, key, previous.get(ref)))
        try:
            blobs.put_many(org, puts)
            for st in staged:
                graph = req.graphs.get(st.spec.id)
                if graph is not None:
                    graph_payloads.save(self._records, blobs, org, st.ref, st.key, graph.to_json())
        except BaseException:
            for st in staged:
                with contextlib.suppress(Exception):
                    blobs.delete(org, st.key)
            raise
        return staged

    def _write_records(
        self, org: str, req: IngestRequest, staged: list[_Staged]
    ) -> list[tuple[ItemRecord, StoredItem | None] | None]:
        """The staged items' records in one conditional write; item by item (compare-and-set) when a status
        update of a previous version landed meanwhile. None for an item upsert=false found existing."""
        now = self._clock.now()
        written = [_versioned(st.spec, st.ref, st.version, st.key, now, st.previous) for st in staged]
        try:
            self._records.transact(org, [put for _, put in written])
        except ConditionFailed:
            return [self._write_record(org, st, upsert=req.upsert) for st in staged]
        return [(record, st.previous) for st, (record, _) in zip(staged, written, strict=True)]

    def _write_record(self, org: str, st: _Staged, *, upsert: bool) -> tuple[ItemRecord, StoredItem | None] | None:
        """Write one new version's record over the current one, reading it again on each try (a status update of
        the previous version may land in between). None when upsert=false finds an item."""
        for _ in range(20):
            previous = self._items.get(org, st.ref)
            if previous is not None and not upsert:
                return None
            record, put = _versioned(st.spec, st.ref, st.version, st.key, self._clock.now(), previous)
            try:
                self._records.put(org, put)
                return record, previous
            except ConditionFailed:
                if not upsert:
                    return None
        raise StoreUnavailable(f"item '{st.ref.item_id}' kept changing; retry the ingest")
