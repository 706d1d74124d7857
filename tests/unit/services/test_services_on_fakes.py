"""The services built on the in-memory port fakes (tests/fakes/ports), no SQLite and no HTTP: key expiry,
database provisioning, ingest acceptance, an item's status transitions, connector sync scheduling and
sealed credentials, with time moved by a FakeClock.

The fakes pass the same contract suites as the real adapters (tests/contract), so what holds here holds
for the services' logic; the SQLite and AWS stacks are covered by the API and AWS suites.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from ctxstore.domain.errors import ApiError, ErrorCode, StoreUnavailable
from ctxstore.domain.ingest_request import IngestRequest, parse_ingest
from ctxstore.domain.items import COMPLETED, PROCESSING, QUEUED, ItemRef
from ctxstore.ports.credential_vault import VaultError
from ctxstore.ports.records import ConditionFailed, Put, Record
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.connectors.credentials import CredentialStore
from ctxstore.services.connectors.scheduling import BUSY_RETRY_S, SYNC_QUEUE, SyncScheduling
from ctxstore.services.container import Container
from ctxstore.services.databases import PROVISION_QUEUE
from ctxstore.services.registry import Services
from ctxstore.services.webhooks.events import INDEXING_STATUS_CHANGED
from tests.fakes.ports import (
    FakeClock,
    InMemoryBlobStore,
    InMemoryRecordStore,
    InMemoryScheduler,
    InMemorySearchIndex,
    InMemoryVault,
    InMemoryWorkflowStarter,
    InMemoryWorkQueue,
    RecordingEventSink,
)

DB = "acme"


@dataclass
class World:
    clock: FakeClock
    queue: InMemoryWorkQueue
    blobs: InMemoryBlobStore
    index: InMemorySearchIndex
    workflow: InMemoryWorkflowStarter
    events: RecordingEventSink
    services: Services

    def principal(self, org: str = "o1") -> Principal:
        return self.services.keys.authenticate(self.services.keys.create(org))

    def ready_database(self, who: Principal) -> None:
        self.services.databases.create(who, DB, None, "metadata_schema")
        for job in self.queue.claim(PROVISION_QUEUE, lease_s=60, limit=10):
            self.services.databases.provision(job.org, str(job.payload["database"]))
            self.queue.complete(job)


@pytest.fixture
def world() -> World:
    clock = FakeClock()
    records, queue, blobs = InMemoryRecordStore(clock), InMemoryWorkQueue(clock), InMemoryBlobStore()
    index, workflow = InMemorySearchIndex(), InMemoryWorkflowStarter()
    c = Container(records=records, queue=queue, blobs=blobs, clock=clock, search_index=index, workflow=workflow)
    services = Services(c)
    events = RecordingEventSink()
    c.events = events  # in place of the webhook service: the events themselves are what is checked
    return World(clock, queue, blobs, index, workflow, events, services)


def notes(*items: tuple[str, str], upsert: str | None = None) -> IngestRequest:
    raw = [{"id": i, "title": i, "type": "note", "content": {"text": text}} for i, text in items]
    return parse_ingest(
        store_raw=None,
        database=DB,
        collection="",
        upsert_raw=upsert,
        uploads=[],
        document_metadata=None,
        app_knowledge=json.dumps(raw),
        memories=None,
        graph_payload=None,
        classify=None,
    )


def statuses(world: World) -> list[tuple[Any, Any]]:
    return [
        (p["indexing_status"], p["previous_status"]) for _, t, p in world.events.events if t == INDEXING_STATUS_CHANGED
    ]


def test_a_key_expires_when_the_clock_says_so(world: World) -> None:
    keys = world.services.keys
    token = keys.create("o1", expires_in_s=60)
    assert keys.authenticate(token).org == "o1"
    world.clock.advance(60)
    with pytest.raises(ApiError) as err:
        keys.authenticate(token)
    assert err.value.code == ErrorCode.UNAUTHORIZED


def test_a_database_is_ready_once_its_provisioning_job_ran(world: World) -> None:
    who = world.principal()
    world.services.databases.create(who, DB, None, "metadata_schema")
    assert world.services.databases.status(who, DB)["status"] != "ready"
    assert world.queue.pending(PROVISION_QUEUE) == 1
    [job] = world.queue.claim(PROVISION_QUEUE, lease_s=60)
    world.services.databases.provision(job.org, DB)
    world.queue.complete(job)
    assert world.services.databases.status(who, DB)["status"] == "ready"
    assert world.index.count(who.org, DB, "knowledge") == 0  # the index knows the database, empty


def test_ingest_stores_the_payload_starts_one_workflow_and_queues_the_item(world: World) -> None:
    who = world.principal()
    world.ready_database(who)
    out = world.services.ingest.accept(who, notes(("a", "Alpha note."), ("b", "Beta note.")))
    assert out["success"] is True and out["success_count"] == 2
    assert [r["status"] for r in out["results"]] == [QUEUED, QUEUED]
    ref = ItemRef(DB, "", "knowledge", "a")
    rec = world.services.items.get(who.org, ref)
    assert rec is not None and rec.data["status"] == QUEUED
    assert rec.data["created_at"] == rec.data["updated_at"] == world.clock.now()
    assert json.loads(world.blobs.get(who.org, rec.data["blob_key"]))["text"] == "Alpha note."
    started = [payload for org, payload in world.workflow.started.values() if org == who.org]
    assert sorted(p["ref"]["id"] for p in started) == ["a", "b"]
    assert {p["version"] for p in started if p["ref"]["id"] == "a"} == {rec.data["version"]}
    assert statuses(world) == [(QUEUED, None), (QUEUED, None)]
    assert world.services.items.get("o2", ref) is None  # another organisation sees nothing


def test_a_re_ingest_replaces_the_version_and_its_blob_and_upsert_false_refuses(world: World) -> None:
    who = world.principal()
    world.ready_database(who)
    world.services.ingest.accept(who, notes(("a", "First.")))
    ref = ItemRef(DB, "", "knowledge", "a")
    first = world.services.items.get(who.org, ref)
    assert first is not None
    world.clock.advance(30)
    world.services.ingest.accept(who, notes(("a", "Second.")))
    second = world.services.items.get(who.org, ref)
    assert second is not None and second.data["version"] != first.data["version"]
    assert second.data["created_at"] == first.data["created_at"] and second.data["updated_at"] == world.clock.now()
    assert not world.blobs.exists(who.org, first.data["blob_key"])  # the old version's original is gone
    assert json.loads(world.blobs.get(who.org, second.data["blob_key"]))["text"] == "Second."
    assert len(world.workflow.started) == 2
    with pytest.raises(ApiError) as err:
        world.services.ingest.accept(who, notes(("a", "Third."), upsert="false"))
    assert err.value.code == ErrorCode.CONFLICT
    assert world.services.items.get(who.org, ref).data["version"] == second.data["version"]  # type: ignore[union-attr]


def test_status_moves_only_for_the_current_version(world: World) -> None:
    who = world.principal()
    world.ready_database(who)
    world.services.ingest.accept(who, notes(("a", "Alpha.")))
    items, ref = world.services.items, ItemRef(DB, "", "knowledge", "a")
    v1 = items.get(who.org, ref).data["version"]  # type: ignore[union-attr]
    world.clock.advance(5)
    assert items.set_status(who.org, ref, v1, PROCESSING) is True
    world.services.ingest.accept(who, notes(("a", "Alpha, edited.")))  # a newer version arrives meanwhile
    assert items.set_status(who.org, ref, v1, COMPLETED, extra={"chunk_count": 3}) is False  # stale job: no effect
    rec = items.get(who.org, ref)
    assert rec is not None and rec.data["status"] == QUEUED and rec.data["chunk_count"] == 0
    v2 = rec.data["version"]
    world.clock.advance(5)
    assert items.set_status(who.org, ref, v2, COMPLETED, extra={"chunk_count": 1}) is True
    rec = items.get(who.org, ref)
    assert rec is not None and (rec.data["status"], rec.data["chunk_count"]) == (COMPLETED, 1)
    assert rec.data["updated_at"] == world.clock.now()
    assert statuses(world) == [(QUEUED, None), (PROCESSING, QUEUED), (QUEUED, PROCESSING), (COMPLETED, QUEUED)]


def test_connector_syncs_follow_the_scheduler_and_never_run_twice() -> None:
    clock = FakeClock()
    queue, scheduler = InMemoryWorkQueue(clock), InMemoryScheduler()
    sched = SyncScheduling(queue, scheduler, clock)
    start = clock.now() + 600
    sched.reschedule("o1", {"connector_id": "c1", "next_sync_at": start, "sync_interval_seconds": 3600})
    assert sched.enqueue_due() == 0  # not yet
    clock.advance(600)
    assert sched.enqueue_due() == 1
    [job] = queue.claim(SYNC_QUEUE, lease_s=300)
    assert (job.job_id, job.payload["trigger"]) == ("c1", "schedule")
    assert sched.enqueue_due() == 0  # fired once for this interval
    clock.advance(3600)  # due again while the first sync still runs: not queued twice, looked at again soon
    assert sched.enqueue_due() == 0 and queue.pending(SYNC_QUEUE) == 1
    assert scheduler.next_at("o1", "c1") == clock.now() + BUSY_RETRY_S
    queue.complete(job)
    clock.advance(BUSY_RETRY_S)
    assert sched.enqueue_due() == 1
    sched.reschedule("o1", {"connector_id": "c1", "next_sync_at": None, "sync_interval_seconds": 3600})
    assert scheduler.count() == 0  # a connector without a next sync has no schedule


def test_connector_credentials_are_sealed_bound_and_written_compare_and_set() -> None:
    clock = FakeClock()
    records = InMemoryRecordStore(clock)
    vault = InMemoryVault()
    creds = CredentialStore(records, lambda: vault, clock)
    records.put("o1", creds.sealed_put("o1", "c1", {"access_token": "xoxb-secret"}, if_version=None))
    stored = records.get("o1", rk.CONNECTOR_CREDENTIALS, "", "c1")
    assert stored is not None and "xoxb-secret" not in json.dumps(stored.data)
    got, version = creds.load("o1", "c1")
    assert got == {"access_token": "xoxb-secret"}
    assert creds.save("o1", "c1", {"access_token": "rotated"}, if_version=version) == version + 1
    with pytest.raises(ConditionFailed):  # a second writer that read the old set loses
        creds.save("o1", "c1", {"access_token": "other"}, if_version=version)
    # the sealed value copied onto another connector's record does not open there
    records.put("o1", Put(rk.CONNECTOR_CREDENTIALS, "", "c2", dict(stored.data)))
    with pytest.raises(VaultError):
        creds.load("o1", "c2")


def test_a_delete_racing_the_provisioning_job_still_deletes(world: World) -> None:
    who = world.principal()
    databases = world.services.databases
    databases.create(who, DB, None, "metadata_schema")
    [job] = world.queue.claim(PROVISION_QUEUE, lease_s=60)
    records = world.services.container.records
    original = records.transact

    def racing(org: str, ops: Any) -> None:  # the job flips the record between the delete's read and its mark
        records.transact = original  # type: ignore[method-assign]
        databases.provision(job.org, DB)
        original(org, ops)

    records.transact = racing  # type: ignore[method-assign]
    assert databases.delete(who, DB)["status"] == "completed"
    with pytest.raises(ApiError) as err:
        databases.status(who, DB)
    assert err.value.code == ErrorCode.DATABASE_NOT_FOUND


def test_a_schema_field_added_while_the_provisioning_job_runs_is_kept_and_the_database_gets_ready(
    world: World,
) -> None:
    # CI saw the console's "add a field" right after "create" answer 409: the job had flipped the record between
    # the schema update's read and its write. The other order lost the job's write: ready never came.
    who = world.principal()
    databases = world.services.databases
    records = world.services.container.records
    original = records.put
    field = [{"name": "team", "data_type": "VARCHAR"}]

    # 1. the job lands between the schema update's read and its write
    databases.create(who, DB, None, "metadata_schema")
    [job] = world.queue.claim(PROVISION_QUEUE, lease_s=60)

    def job_first(org: str, put: Put) -> Record:
        records.put = original  # type: ignore[method-assign]
        databases.provision(job.org, DB)
        return original(org, put)

    records.put = job_first  # type: ignore[method-assign]
    assert databases.update_schema(who, DB, field)["added_fields"] == ["team"]
    status = databases.status(who, DB)
    assert status["status"] == "ready" and status["infra"]["ready_for_ingestion"] is True
    assert [f.name for f in databases.schema(who, DB)] == ["team"]

    # 2. the schema update lands between the job's read and its write
    other = "beta"
    databases.create(who, other, None, "metadata_schema")
    [job] = world.queue.claim(PROVISION_QUEUE, lease_s=60)
    index = world.index
    ensure = index.ensure_database

    def schema_first(org: str, database: str) -> bool:  # runs inside provision, between its read and its write
        index.ensure_database = ensure  # type: ignore[method-assign]
        databases.update_schema(who, other, field)
        return ensure(org, database)

    index.ensure_database = schema_first  # type: ignore[method-assign]
    databases.provision(job.org, other)
    status = databases.status(who, other)
    assert status["status"] == "ready" and status["infra"]["ready_for_ingestion"] is True
    assert [f.name for f in databases.schema(who, other)] == ["team"]


def test_a_provisioning_job_that_keeps_losing_is_retried_not_dropped(world: World) -> None:
    who = world.principal()
    databases = world.services.databases
    records = world.services.container.records
    databases.create(who, DB, None, "metadata_schema")
    [job] = world.queue.claim(PROVISION_QUEUE, lease_s=60)
    original = records.put

    def always_beaten(org: str, put: Put) -> Record:
        if put.kind == rk.DATABASE:
            raise ConditionFailed(put.sk)
        return original(org, put)

    records.put = always_beaten  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        databases.provision(job.org, DB)
    records.put = original  # type: ignore[method-assign]
    assert records.get(rk.SYSTEM_ORG, rk.PENDING_DB_WORK, "", f"{job.org}{rk.SEP}{DB}") is not None
    databases.provision(job.org, DB)  # the retry
    assert databases.status(who, DB)["status"] == "ready"
