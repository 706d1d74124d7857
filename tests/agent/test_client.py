"""ctxstore.client against a real `ctxstore serve`: every call it makes, typed results, typed errors, retries."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ctxstore.client import CtxstoreClient, CtxstoreError, Document
from tests.agent.conftest import Served
from tests.support.server import ServerProcess

NOTE = b"# Penguins\nEmperor penguins breed in Antarctica during the winter. Acme Zoo was founded by Jane Doe."


def test_ingest_status_query_inspect_delete(served: Served) -> None:
    db = served.ready_database()
    with served.client(db) as cs:
        docs = [
            Document("penguins.md", NOTE),
            Document("photo.heic", b"not really an image"),  # a rejected kind: per-file failure, the rest go on
            Document("big-notes.txt", b"Krill is what penguins eat. " * 100, "text/plain"),
        ]
        # A request limit below the third file's size sends it by reference (POST /context/uploads, then its URL).
        meta = [{"additional_metadata": {"n": i}} for i in range(3)]
        parts = list(cs.iter_ingest_files(docs, metadata=meta, max_request_bytes=1000, max_request_files=2))
        assert len(parts) == 2
        items = [r for p in parts for r in p.results]
        assert [(r.filename, r.status) for r in items] == [
            ("penguins.md", "queued"),
            ("photo.heic", "failed"),
            ("big-notes.txt", "queued"),
        ]
        assert items[1].error_code == "E1002"
        queued = [r.id for r in items if r.queued]

        statuses = cs.wait_for([*queued, items[1].id], timeout=120, poll_interval=0.2)
        assert [s.indexing_status for s in statuses] == ["completed", "completed", None]
        assert statuses[2].error_code == "FILE_NOT_FOUND" and statuses[2].done

        found = cs.query("Where do emperor penguins breed?", mode="fast", max_results=3)
        assert found.chunks[0].id == queued[0] and found.chunks[0].source_title == "penguins.md"
        assert found.sources[0].id == queued[0]
        krill = cs.query("krill", query_by="text", max_results=1)
        assert krill.chunks[0].id == queued[1]

        page = cs.list_sources(page_size=10)
        assert {s.id for s in page.sources} == set(queued) and page.total == 2
        by_id = {s.id: s.raw()["additional_metadata"] for s in page.sources}
        assert by_id == {queued[0]: {"n": 0}, queued[1]: {"n": 2}}  # metadata stayed with its file
        shown = cs.inspect(queued[0])
        assert shown.title == "penguins.md" and "Antarctica" in (shown.content or "")
        assert cs.chunks(queued[0])["chunks"][0]["position"] == 0
        cs.update_metadata(queued[0], additional_metadata={"team": "birds"})
        filtered = cs.query("penguins", metadata_filters={"additional_metadata": {"team": "birds"}}, mode="fast")
        assert {c.id for c in filtered.chunks} == {queued[0]}
        assert cs.subgraph(queued[0]).sources[0].source_id == queued[0]
        assert isinstance(cs.relations(queued[0]).relations, list)

        gone = cs.delete([queued[0], "never-was"])
        assert gone.deleted_count == 1 and [r["deleted"] for r in gone.results] == [True, False]
        assert cs.status([queued[0]])[0].found is False


def test_memories_app_items_and_databases(served: Served) -> None:
    db = served.ready_database()
    with served.client(db) as cs:
        mem = cs.ingest_memories([{"text": "I prefer aisle seats on long flights.", "infer": True, "id": "m1"}])
        app = cs.ingest_app_items(
            [{"id": "t1", "title": "Ticket 1", "type": "ticket", "content": {"text": "VPN broken"}}]
        )
        assert mem.queued_ids == ["m1"] and app.queued_ids == ["t1"]
        assert all(s.indexing_status == "completed" for s in cs.wait_for(["t1"], timeout=60, poll_interval=0.2))
        assert cs.wait_for(["m1"], timeout=60, poll_interval=0.2)[0].indexing_status == "completed"
        hits = cs.query("which seat do I like", type="memory", mode="fast")
        assert hits.chunks and hits.chunks[0].id == "m1"
        assert db in cs.databases.list()
        assert cs.databases.collections(db) == [""]
        assert cs.databases.stats(db)["memory_collection"]["row_count"] >= 1
        with pytest.raises(CtxstoreError) as dup:
            cs.databases.create(db)
        assert dup.value.code == "DATABASE_ALREADY_EXISTS" and dup.value.status == 409


def test_byog_and_webhooks(served: Served) -> None:
    with served.client() as cs:
        g = f"g{int(time.time() * 1000)}"
        assert cs.byog.create_database(g)["status"] == "ready"
        assert cs.byog.query(g, "people", "CREATE (:P {name: $n})", {"n": "Ada"}) == []
        assert cs.byog.query(g, "people", "MATCH (p:P) RETURN p.name AS name") == [{"name": "Ada"}]
        assert cs.byog.collections(g) == ["people"]
        assert cs.byog.drop_database(g)["deleted"] is True
        hook = cs.webhooks.register("http://127.0.0.1:9/hook", generate_signing_secret=True)
        assert hook["url"] == "http://127.0.0.1:9/hook" and str(hook.get("signing_secret", "")).startswith("whsec_")
        got = cs.webhooks.get()
        assert got["url"] == "http://127.0.0.1:9/hook" and "meta" not in got  # the object, not the envelope
        assert cs.webhooks.delete()["deleted"] is True
        assert cs.webhooks.get()["registered"] is False
        with pytest.raises(CtxstoreError) as none:
            cs.webhooks.delete()
        assert none.value.code == "NOT_FOUND"


def test_typed_errors(served: Served) -> None:
    with served.client("no-such-db") as cs:
        with pytest.raises(CtxstoreError) as missing:
            cs.query("x")
        err = missing.value
        assert (err.code, err.status) == ("DATABASE_NOT_FOUND", 404) and len(err.request_id or "") == 36
    with CtxstoreClient(served.url, "csk_notakey") as bad, pytest.raises(CtxstoreError) as unauth:
        bad.databases.list()
    assert (unauth.value.code, unauth.value.status) == ("UNAUTHORIZED", 401)
    with CtxstoreClient(served.url, served.key) as no_default, pytest.raises(CtxstoreError) as scope:
        no_default.status(["x"])
    assert scope.value.code == "INVALID_PARAMETERS" and scope.value.status is None  # refused before any request
    with CtxstoreClient("http://127.0.0.1:9", "k", max_retry_wait_s=1) as nowhere, pytest.raises(CtxstoreError) as down:
        nowhere.health()
    assert down.value.code == "UNREACHABLE"


def test_rate_limited_calls_are_retried_after_retry_after(tmp_path: Path) -> None:
    env = {"CTXSTORE_RATE_LIMIT_PER_MINUTE": "60", "CTXSTORE_RATE_LIMIT_BURST": "1"}
    with ServerProcess(tmp_path / "d", env=env) as srv:
        srv.wait_ready(60)
        [key] = srv.printed_keys
        with CtxstoreClient(srv.base_url, key) as patient:
            started = time.monotonic()
            for _ in range(3):  # one token a second, burst 1: the 2nd and 3rd calls get 429 and wait it out
                assert patient.databases.list() == []
            assert time.monotonic() - started >= 1.5
        with CtxstoreClient(srv.base_url, key, max_attempts=1) as impatient, pytest.raises(CtxstoreError) as limited:
            impatient.databases.list()
            impatient.databases.list()
        assert limited.value.code == "RATE_LIMITED" and limited.value.retry_after is not None
