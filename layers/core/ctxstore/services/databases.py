"""Databases and collections: create (asynchronous provisioning), status, list, stats, schema, delete."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from ctxstore.domain import metadata_schema as ms
from ctxstore.domain.errors import ApiError, ErrorCode, StoreUnavailable, database_not_found
from ctxstore.domain.scopes import DEFAULT_COLLECTION, validate_collection_name, validate_database_name
from ctxstore.ports.blobs import BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import ConditionFailed, Delete, Put, Record, RecordStore
from ctxstore.ports.search_index import SearchIndex
from ctxstore.ports.work_queue import WorkQueue
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.items.service import GRAPH_PAYLOAD, ITEM

PROVISION_QUEUE = "databases"
READY = "ready"
PROVISIONING = "provisioning"
DELETING = "deleting"
# A database record's read-modify-writes (schema, provisioning, delete) race one another: read again this often.
CHANGED_RECORD_RETRIES = 5

# Hooks other capabilities register to remove their share of a scope: (org, database, collection|None).
ScopePurger = Callable[[str, str, str | None], None]


class VectorstoreStatus(TypedDict):
    knowledge: bool
    memories: bool


class Infra(TypedDict):
    """Which of a database's stores are ready (written on the record by provisioning)."""

    scheduler_status: bool
    graph_status: bool
    vectorstore_status: VectorstoreStatus
    ready_for_ingestion: bool


# The answers the HTTP layer renders (the `data` of each /databases route), exactly their JSON keys.
class DatabaseStatusAnswer(TypedDict):
    database: str
    tenant_id: str
    org_id: str
    status: str | None
    infra: Infra
    message: str


class FailedDatabase(TypedDict):
    database: str
    tenant_id: str
    error: str


class DatabaseListAnswer(TypedDict):
    databases: list[str]
    tenant_ids: list[str]
    failed_databases: list[FailedDatabase]
    failed_tenant_ids: list[FailedDatabase]
    message: str


class CollectionListAnswer(TypedDict):
    database: str
    collections: list[str]
    sub_tenant_ids: list[str]
    message: str


class RowCount(TypedDict):
    row_count: int


class DatabaseStatsAnswer(TypedDict):
    database: str
    tenant_id: str
    knowledge_collection: RowCount
    memory_collection: RowCount
    message: str


class DatabaseCreateAnswer(TypedDict):
    database: str
    tenant_id: str
    status: str
    message: str


class SchemaUpdateAnswer(TypedDict):
    database: str
    tenant_id: str
    added_fields: list[str]


class CollectionDeleteAnswer(TypedDict):
    database: str
    collection: str
    tenant_id: str
    sub_tenant_id: str
    deleted: bool
    status: str
    message: str


class DatabaseDeleteAnswer(TypedDict):
    database: str
    tenant_id: str
    status: str
    message: str


def _infra(ready: bool) -> Infra:
    return {
        "scheduler_status": ready,
        "graph_status": ready,
        "vectorstore_status": {"knowledge": ready, "memories": ready},
        "ready_for_ingestion": ready,
    }


class DatabaseService:
    def __init__(
        self,
        records: RecordStore,
        clock: Clock,
        *,
        queue: Callable[[], WorkQueue],
        blobs: Callable[[], BlobStore],
        search_index: Callable[[], SearchIndex | None],
        purgers: list[ScopePurger] | None = None,
        max_per_org: int = 0,
    ) -> None:
        """`queue`, `blobs`, `search_index`: providers, read only by provisioning and deletes (almost every
        Lambda builds this service; on AWS a port read builds its boto3 client). The search index is None when
        CTXSTORE_SEARCH_ENDPOINT is unset on AWS (template.yaml sets it for every function)."""
        self._records = records
        self._clock = clock
        self._queue = queue
        self._blobs = blobs
        self._search_index = search_index
        self._max_per_org = max_per_org  # the plan limit (CTXSTORE_MAX_DATABASES_PER_ORG); 0: none
        self._purgers: list[ScopePurger] = list(purgers or [])

    def add_purger(self, purger: ScopePurger) -> None:
        self._purgers.append(purger)

    # ---- reads -------------------------------------------------------------------------
    def _get(self, org: str, database: str) -> Record | None:
        rec = self._records.get(org, rk.DATABASE, "", database)
        if rec is None or rec.data.get("status") == DELETING:
            return None
        return rec

    def require(self, principal: Principal, database: str) -> Record:
        """The database record, or 404 (another organisation's database looks exactly like a missing one)."""
        validate_database_name(database)
        rec = self._get(principal.org, database)
        if rec is None:
            raise database_not_found(database)
        principal.check_database(database)
        return rec

    def schema(self, principal: Principal, database: str) -> list[ms.FieldDef]:
        rec = self.require(principal, database)
        return [ms.parse_field(f, "schema") for f in rec.data.get("metadata_schema", [])]

    def status(self, principal: Principal, database: str) -> DatabaseStatusAnswer:
        rec = self.require(principal, database)
        ready = rec.data.get("status") == READY
        return {
            "database": database,
            "tenant_id": database,
            "org_id": principal.org,
            "status": rec.data.get("status"),
            "infra": rec.data.get("infra") or _infra(ready),
            "message": "Success",
        }

    def list(self, principal: Principal) -> DatabaseListAnswer:
        names: list[str] = []
        failed: list[FailedDatabase] = []
        after: str | None = None
        while True:
            page = self._records.query(principal.org, rk.DATABASE, "", after=after, limit=1000)
            for r in page.records:
                if r.data.get("status") == DELETING:
                    continue
                if principal.databases is not None and r.sk not in principal.databases:
                    continue
                if r.data.get("status") == "failed":
                    failed.append({"database": r.sk, "tenant_id": r.sk, "error": r.data.get("error", "")})
                else:
                    names.append(r.sk)
            if page.next_after is None:
                break
            after = page.next_after
        return {
            "databases": names,
            "tenant_ids": names,
            "failed_databases": failed,
            "failed_tenant_ids": failed,
            "message": "Success",
        }

    def list_collections(self, principal: Principal, database: str) -> CollectionListAnswer:
        self.require(principal, database)
        cols: list[str] = []
        after: str | None = None
        while True:
            page = self._records.query(principal.org, rk.COLLECTION, database, after=after, limit=1000)
            cols.extend(r.sk for r in page.records)
            if page.next_after is None:
                break
            after = page.next_after
        return {"database": database, "collections": cols, "sub_tenant_ids": cols, "message": "Success"}

    def stats(self, principal: Principal, database: str) -> DatabaseStatsAnswer:
        self.require(principal, database)
        idx = self._search_index()
        knowledge = idx.count(principal.org, database, "knowledge") if idx else 0
        memory = idx.count(principal.org, database, "memory") if idx else 0
        return {
            "database": database,
            "tenant_id": database,
            "knowledge_collection": {"row_count": knowledge},
            "memory_collection": {"row_count": memory},
            "message": "Success",
        }

    # ---- writes ------------------------------------------------------------------------
    def create(self, principal: Principal, database: str, schema_raw: object, field: str) -> DatabaseCreateAnswer:
        validate_database_name(database)
        principal.check_database(database)
        schema = ms.parse_schema(schema_raw, field)
        limit = self._max_per_org
        if limit and self._records.count(principal.org, rk.DATABASE, "") >= limit:
            raise ApiError(ErrorCode.FORBIDDEN, f"plan limit reached: at most {limit} databases per organisation")
        existing = self._records.get(principal.org, rk.DATABASE, "", database)
        if existing is not None and existing.data.get("status") == DELETING:
            self._finish_delete(principal.org, database)  # a pending delete finishes before the name is reused
        now = self._clock.now()
        data = {
            "database": database,
            "status": PROVISIONING,
            "created_at": now,
            "infra": _infra(False),
            "metadata_schema": [f.to_json() for f in schema],
        }
        # Marker first: if the process dies after the record is written, start-up recovery provisions it.
        self._records.put(
            rk.SYSTEM_ORG, Put(rk.PENDING_DB_WORK, "", f"{principal.org}{rk.SEP}{database}", {"op": "provision"})
        )
        try:
            self._records.put(principal.org, Put(rk.DATABASE, "", database, data, if_absent=True))
        except ConditionFailed:
            raise ApiError(ErrorCode.DATABASE_ALREADY_EXISTS, f"Database '{database}' already exists") from None
        self._queue().enqueue(
            principal.org,
            PROVISION_QUEUE,
            f"provision{rk.SEP}{database}{rk.SEP}{now}",
            {"op": "provision", "database": database},
        )
        return {
            "database": database,
            "tenant_id": database,
            "status": PROVISIONING,
            "message": "Database creation accepted; poll GET /databases/status until ready_for_ingestion",
        }

    def provision(self, org: str, database: str) -> None:
        """Job handler: make every store ready for the database, then flip its infra flags."""
        rec = self._records.get(org, rk.DATABASE, "", database)
        if rec is not None and rec.data.get("status") == PROVISIONING:
            idx = self._search_index()
            vector_ok = idx.ensure_database(org, database) if idx else True
            infra = _infra(True)
            infra["vectorstore_status"] = {"knowledge": vector_ok, "memories": vector_ok}
            infra["ready_for_ingestion"] = vector_ok
            # A schema update may rewrite the record meanwhile: keep it and write the flags again. A delete
            # (or a record no longer provisioning) is the newer state and wins.
            for _ in range(CHANGED_RECORD_RETRIES):
                data = dict(rec.data, status=READY if vector_ok else PROVISIONING, infra=infra)
                try:
                    self._records.put(org, Put(rk.DATABASE, "", database, data, if_version=rec.version))
                    break
                except ConditionFailed:
                    rec = self._records.get(org, rk.DATABASE, "", database)
                    if rec is None or rec.data.get("status") != PROVISIONING:
                        break
            else:  # kept losing: the job runs again later (its pending mark stays for a restart)
                raise StoreUnavailable(f"database '{database}' kept changing while it was provisioned")
        self._records.delete(rk.SYSTEM_ORG, rk.PENDING_DB_WORK, "", f"{org}{rk.SEP}{database}")

    def update_schema(self, principal: Principal, database: str, add_raw: object) -> SchemaUpdateAnswer:
        added = ms.parse_schema(add_raw, "add_fields")
        if not added:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, "'add_fields' must name at least one field")
        # The provisioning job (or another update) may rewrite the record between the read and the write: the
        # fields are merged into what is there again, so only a record that keeps changing is a conflict.
        for _ in range(CHANGED_RECORD_RETRIES):
            rec = self.require(principal, database)
            existing = [ms.parse_field(f, "schema") for f in rec.data.get("metadata_schema", [])]
            merged = ms.merge_additive(existing, added)
            data = dict(rec.data, metadata_schema=[f.to_json() for f in merged])
            try:
                self._records.put(principal.org, Put(rk.DATABASE, "", database, data, if_version=rec.version))
                break
            except ConditionFailed:
                continue
        else:
            raise ApiError(ErrorCode.CONFLICT, "the schema kept changing concurrently; retry")
        return {"database": database, "tenant_id": database, "added_fields": [f.name for f in added]}

    def note_collection(self, principal: Principal, database: str, collection: str) -> None:
        """Record that a collection holds data (called by writers), so listings show it."""
        try:
            self._records.put(
                principal.org,
                Put(rk.COLLECTION, database, collection, {"created_at": self._clock.now()}, if_absent=True),
            )
        except ConditionFailed:
            pass

    def delete_collection(self, principal: Principal, database: str, collection: object) -> CollectionDeleteAnswer:
        self.require(principal, database)
        if collection is None:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, "'collection' is required")
        col = validate_collection_name(collection)
        for purge in self._purgers:
            purge(principal.org, database, col)
        if (idx := self._search_index()) is not None:
            idx.delete_scope(principal.org, database, col)
        for kind in (ITEM, GRAPH_PAYLOAD):
            self._records.delete_partitions(principal.org, kind, f"{database}{rk.SEP}{col}{rk.SEP}")
        self._blobs().delete_prefix(principal.org, rk.blob_scope_prefix(database, col))
        self._records.delete(principal.org, rk.COLLECTION, database, col)
        return {
            "database": database,
            "collection": col,
            "tenant_id": database,
            "sub_tenant_id": col,
            "deleted": True,
            "status": "completed",
            "message": "Success",
        }

    def delete(self, principal: Principal, database: str) -> DatabaseDeleteAnswer:
        # Mark first: the database vanishes for readers at once, and a crash mid-purge resumes at start-up. The
        # provisioning job may flip the record between the read and the mark: read it again (a few times).
        for attempt in range(CHANGED_RECORD_RETRIES):
            rec = self.require(principal, database)
            try:
                self._records.transact(
                    principal.org,
                    [Put(rk.DATABASE, "", database, dict(rec.data, status=DELETING), if_version=rec.version)],
                )
                break
            except ConditionFailed:
                if attempt == CHANGED_RECORD_RETRIES - 1:
                    raise
        self._records.put(
            rk.SYSTEM_ORG, Put(rk.PENDING_DB_WORK, "", f"{principal.org}{rk.SEP}{database}", {"op": "delete"})
        )
        self._finish_delete(principal.org, database)
        return {"database": database, "tenant_id": database, "status": "completed", "message": "Success"}

    def _finish_delete(self, org: str, database: str) -> None:
        for purge in self._purgers:
            purge(org, database, None)
        if (idx := self._search_index()) is not None:
            idx.delete_scope(org, database, None)
        self._blobs().delete_prefix(org, f"{database}/")
        # Item partitions are "<database>SEP…", so the separator keeps "db1" from matching "db10".
        for kind in (ITEM, GRAPH_PAYLOAD):
            self._records.delete_partitions(org, kind, f"{database}{rk.SEP}")
        while True:  # collection records live in the partition named exactly after the database
            page = self._records.query(org, rk.COLLECTION, database, limit=500)
            if not page.records:
                break
            self._records.transact(org, [Delete(rk.COLLECTION, database, r.sk) for r in page.records])
        self._records.transact(org, [Delete(rk.DATABASE, "", database)])
        self._records.delete(rk.SYSTEM_ORG, rk.PENDING_DB_WORK, "", f"{org}{rk.SEP}{database}")

    def recover(self) -> int:
        """At start-up: finish deletes and provisioning that a crash interrupted."""
        n = 0
        page = self._records.query(rk.SYSTEM_ORG, rk.PENDING_DB_WORK, "", limit=10000)
        for r in page.records:
            org, database = r.sk.split(rk.SEP, 1)
            if r.data.get("op") == "delete":
                self._finish_delete(org, database)
            else:
                self.provision(org, database)
            n += 1
        return n


def collection_or_default(value: str | None) -> str:
    return value if value else DEFAULT_COLLECTION
