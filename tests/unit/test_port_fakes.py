"""What the port fakes add beyond their contract suites: time from a FakeClock (leases, delays and expiry
without sleeping), and the limits they refuse as the AWS services do."""

from __future__ import annotations

import numpy as np
import pytest

from ctxstore.ports.credential_vault import VaultError
from ctxstore.ports.records import Put
from ctxstore.ports.search_index import ChunkDoc, Store
from tests.fakes.ports import (
    FakeClock,
    InMemoryBlobStore,
    InMemoryRecordStore,
    InMemorySearchIndex,
    InMemoryVault,
    InMemoryWorkflowStarter,
    InMemoryWorkQueue,
)


def test_queue_leases_and_delays_follow_the_fake_clock() -> None:
    clock = FakeClock()
    q = InMemoryWorkQueue(clock)
    q.enqueue("o", "q", "j", {"n": 1})
    q.enqueue("o", "q", "later", {}, delay_s=120)
    [job] = q.claim("q", lease_s=30)
    assert q.claim("q", lease_s=30) == []
    clock.advance(30)  # the lease ran out: the job is handed out again
    [again] = q.claim("q", lease_s=30)
    assert again.job_id == "j" and again.attempts == 2
    q.complete(job)  # the stale holder's ack changes nothing
    assert q.pending("q") == 2
    q.retry(again, delay_s=60, error="E6001")
    clock.advance(59)
    assert q.claim("q", lease_s=30) == []
    clock.advance(61)
    assert [j.job_id for j in q.claim("q", lease_s=30, limit=5)] == ["j", "later"]


def test_queue_keeps_dead_letters_with_their_error() -> None:
    q = InMemoryWorkQueue(FakeClock())
    q.enqueue("o", "q", "j", {})
    [job] = q.claim("q", lease_s=30)
    q.fail(job, error="boom")
    assert q.dead("q") == [("j", "boom")]


def test_records_expire_on_the_fake_clock_and_refuse_what_json_cannot_hold() -> None:
    clock = FakeClock(start=1000.0)
    records = InMemoryRecordStore(clock)
    records.put("o", Put("k", "p", "s", {"v": 1}, expires_at=1010.0))
    assert records.get("o", "k", "p", "s") is not None
    clock.advance(10)
    assert records.get("o", "k", "p", "s") is None and records.count("o", "k", "p") == 0
    with pytest.raises(TypeError):
        records.put("o", Put("k", "p", "bytes", {"v": b"raw"}))
    assert records.get("o", "k", "p", "bytes") is None
    got = records.put("o", Put("k", "p", "m", {"v": [1]}))
    got.data["v"].append(2)  # a caller's change to what it got back does not reach the store
    assert records.get("o", "k", "p", "m").data == {"v": [1]}  # type: ignore[union-attr]


def test_blob_grants_are_recorded_and_bounded_as_on_s3() -> None:
    blobs = InMemoryBlobStore()
    post = blobs.presigned_post("o", "db/x", expires_in=900, max_bytes=1024, content_type="text/plain")
    [grant] = blobs.grants.values()
    assert post.url.startswith("memory://") and (grant.action, grant.key, grant.max_bytes) == ("put", "db/x", 1024)
    with pytest.raises(ValueError):
        blobs.presigned_post("o", "db/x", expires_in=900, max_bytes=5 * 1024**3 + 1)
    with pytest.raises(ValueError):
        blobs.presigned_url("o", "db/x", expires_in=8 * 24 * 3600, filename="x", content_type="text/plain")
    blobs.put("o", "db/x", b"hi", content_type="text/plain")
    assert blobs.content_type("o", "db/x") == "text/plain"


def test_vault_refuses_what_kms_encrypt_refuses() -> None:
    vault = InMemoryVault()
    with pytest.raises(VaultError):
        vault.seal("o", "c", b"")
    with pytest.raises(VaultError):
        vault.seal("o", "c", b"x" * 4097)
    assert vault.open("o", "c", vault.seal("o", "c", b"x" * 4096)) == b"x" * 4096
    assert InMemoryVault(b"k" * 32).open("o", "c", InMemoryVault(b"k" * 32).seal("o", "c", b"s")) == b"s"
    with pytest.raises(VaultError):  # another key
        InMemoryVault().open("o", "c", vault.seal("o", "c", b"s"))


def _chunk(chunk_id: str, dim: int, store: str = "knowledge") -> ChunkDoc:
    store_name: Store = store  # type: ignore[assignment]
    return ChunkDoc(chunk_id, "item", "db", "c", store_name, "text", np.ones(dim, dtype=np.float32) / np.sqrt(dim))


def test_search_index_keeps_one_dimension_per_database_store() -> None:
    index = InMemorySearchIndex()
    index.upsert("o", [_chunk("a", 4)])
    with pytest.raises(ValueError):  # refused whole: the good chunk of the batch is not written either
        index.upsert("o", [_chunk("b", 4), _chunk("c", 8)])
    assert index.get_chunks("o", ["b", "c"]) == []
    index.upsert("o", [_chunk("m", 8, store="memory")])  # another store may have another dimension
    index.upsert("o", [_chunk("a", 6)])  # the only vector of the store, replaced: the dimension may change
    with pytest.raises(ValueError):
        index.upsert("o", [_chunk("x", 4, store="elsewhere")])


def test_workflow_starts_once_per_execution_name() -> None:
    wf = InMemoryWorkflowStarter()
    assert wf.start("o", "ingest|a|v1", {"v": 1}) is True
    assert wf.start("o", "ingest|a|v1", {"v": 2}) is False
    assert wf.started == {"ingest|a|v1": ("o", {"v": 1})}
