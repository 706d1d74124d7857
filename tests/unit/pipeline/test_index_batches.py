"""Index jobs claimed together (pipeline/index_batches.py): each item ends as if it had run alone, while
the batch shares its lock, index and status writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from ctxstore.domain.items import ItemRef
from ctxstore.ports.records import Delete, Put
from ctxstore.ports.search_index import ChunkDoc, ItemKey
from ctxstore.services.items.service import ITEM
from tests.support.app import LocalApp
from tests.unit.pipeline.conftest import DB
from tests.unit.pipeline.conftest import org_of as _org


def _ingest(app: LocalApp, items: dict[str, str]) -> None:
    notes = [{"id": i, "title": f"Note {i}", "type": "note", "content": {"text": t}} for i, t in items.items()]
    r = app.client.post(
        "/context/ingest", data={"database": DB, "app_knowledge": json.dumps(notes)}, headers=app.headers()
    )
    assert r.status_code == 202, r.text


def _statuses(app: LocalApp, ids: Sequence[str]) -> dict[str, Any]:
    r = app.client.get("/context/status", params={"database": DB, "ids": ",".join(ids)}, headers=app.headers())
    return {s["id"]: s for s in r.json()["data"]["statuses"]}


def _texts(app: LocalApp, item_id: str) -> list[str]:
    idx = app.container.search_index
    assert idx is not None
    return [d.text for d in idx.item_chunks(_org(app), DB, "", "knowledge", item_id)]


class _CountingIndex:
    """The real index; counts the batch writes and can reject any write that holds one item's chunks."""

    def __init__(self, inner: Any, reject: str | None = None) -> None:
        self._inner, self._reject = inner, reject
        self.batches: list[list[str]] = []

    def _check(self, chunks: Sequence[ChunkDoc]) -> None:
        if self._reject is not None and any(c.item_id == self._reject for c in chunks):
            raise ValueError(f"rejected the vectors of {self._reject}")

    def replace_items(self, org: str, items: Sequence[ItemKey], chunks: Sequence[ChunkDoc]) -> None:
        self.batches.append([i.item_id for i in items])
        self._check(chunks)
        self._inner.replace_items(org, items, chunks)

    def upsert(self, org: str, chunks: Sequence[ChunkDoc]) -> None:
        self._check(chunks)
        self._inner.upsert(org, chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_burst_is_published_in_shared_writes_and_every_item_is_searchable(app: LocalApp) -> None:
    counting = _CountingIndex(app.container.search_index)
    app.container.search_index = counting  # type: ignore[assignment]
    items = {f"n{i}": f"Observation {i}: the zebrafish{i} fin regrows after injury." for i in range(12)}
    _ingest(app, items)
    app.drain()
    statuses = _statuses(app, list(items))
    assert {s["indexing_status"] for s in statuses.values()} == {"completed"}
    assert all(s["chunk_count"] == 1 for s in statuses.values())
    # Two workers' shares of 12 queued jobs: a few writes of several items, not one write per item.
    assert sorted(i for b in counting.batches for i in b) == sorted(items)
    assert len(counting.batches) < len(items) and max(len(b) for b in counting.batches) > 1
    for item_id, text in items.items():
        assert _texts(app, item_id) == [f"# Note {item_id}\n\n{text}"]
        r = app.client.post(
            "/query",
            json={"database": DB, "query": f"zebrafish{item_id[1:]}", "mode": "fast", "max_results": 3},
            headers=app.headers(),
        )
        assert r.json()["data"]["chunks"][0]["id"] == item_id


def test_two_versions_of_an_item_in_one_batch_leave_only_the_newest(app: LocalApp) -> None:
    _ingest(app, {"x": "The first draft mentions pelicans.", "y": "Unrelated note."})
    _ingest(app, {"x": "The second draft mentions flamingos."})
    app.drain()
    assert _texts(app, "x") == ["# Note x\n\nThe second draft mentions flamingos."]
    assert _statuses(app, ["x", "y"])["x"]["indexing_status"] == "completed"
    assert app.container.queue.dead("ingest") == []  # type: ignore[attr-defined]


def test_an_item_deleted_while_its_batch_embeds_gets_nothing_written(app: LocalApp) -> None:
    """`a` is embedded, then deleted while `b` embeds: the batch's write must skip it, and index the rest."""
    embedder = app.container.embedder
    assert embedder is not None

    class DeletingEmbedder:
        def embed_documents(self, texts: Sequence[str]) -> Any:
            if any("second" in t for t in texts):
                r = app.client.request("DELETE", "/context", json={"database": DB, "ids": ["a"]}, headers=app.headers())
                assert r.status_code == 200, r.text
            return embedder.embed_documents(texts)

        def __getattr__(self, name: str) -> Any:
            return getattr(embedder, name)

    app.container.embedder = DeletingEmbedder()  # type: ignore[assignment]
    _ingest(app, {"a": "The first note.", "b": "The second note.", "c": "The third note."})
    app.runner.run_once()  # one worker's share of three jobs for two workers: a and b, in one batch
    assert _texts(app, "a") == [] and _texts(app, "b") == ["# Note b\n\nThe second note."]
    app.drain()
    assert _texts(app, "c") == ["# Note c\n\nThe third note."]
    statuses = _statuses(app, ["a", "b", "c"])
    assert statuses["a"]["indexing_status"] is None
    assert statuses["b"]["indexing_status"] == statuses["c"]["indexing_status"] == "completed"


def test_an_item_the_batch_write_rejects_fails_alone(app: LocalApp) -> None:
    app.container.search_index = _CountingIndex(app.container.search_index, reject="bad")  # type: ignore[assignment]
    _ingest(app, {"ok1": "A fine note.", "bad": "A note whose write fails.", "ok2": "Another fine note."})
    app.drain()
    statuses = _statuses(app, ["ok1", "bad", "ok2"])
    assert statuses["ok1"]["indexing_status"] == statuses["ok2"]["indexing_status"] == "completed"
    assert statuses["bad"]["indexing_status"] == "errored" and statuses["bad"]["error_code"] == "E6001"
    assert _texts(app, "bad") == [] and _texts(app, "ok1") == ["# Note ok1\n\nA fine note."]


def test_a_batch_is_marked_processing_in_one_status_write(app: LocalApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """begin_many: the batch's items move to processing together (webhook events still one per item)."""
    records = app.container.records
    single: list[str] = []
    together: list[list[str]] = []
    put, transact = type(records).put, type(records).transact

    def counting_put(self: Any, org: str, p: Put) -> Any:
        if p.kind == ITEM and p.data.get("status") == "processing":
            single.append(p.sk)
        return put(self, org, p)

    def counting_transact(self: Any, org: str, ops: Sequence[Put | Delete]) -> None:
        moved = [op.sk for op in ops if isinstance(op, Put) and op.kind == ITEM and op.data["status"] == "processing"]
        if moved:
            together.append(moved)
        transact(self, org, ops)

    monkeypatch.setattr(type(records), "put", counting_put)
    monkeypatch.setattr(type(records), "transact", counting_transact)
    items = {f"p{i}": f"Observation {i}: the axolotl{i} limb regrows." for i in range(6)}
    _ingest(app, items)
    app.drain()
    assert single == []
    assert sorted(i for batch in together for i in batch) == sorted(items)
    assert max(len(batch) for batch in together) > 1
    assert {s["indexing_status"] for s in _statuses(app, list(items)).values()} == {"completed"}


def test_a_job_whose_record_is_not_there_yet_does_not_hold_back_its_batch(app: LocalApp) -> None:
    """One job of a batch fails its begin (its item is gone): the others of the batch are indexed."""
    _ingest(app, {"k1": "The first kept note.", "gone": "A note deleted early.", "k2": "The second kept note."})
    org = _org(app)
    app.container.records.delete(org, ITEM, ItemRef(DB, "", "knowledge", "gone").pk, "gone")
    app.drain()
    assert _texts(app, "k1") == ["# Note k1\n\nThe first kept note."]
    assert _texts(app, "k2") == ["# Note k2\n\nThe second kept note."]
    assert _texts(app, "gone") == []
    statuses = _statuses(app, ["k1", "k2"])
    assert statuses["k1"]["indexing_status"] == statuses["k2"]["indexing_status"] == "completed"


class _RecordingEmbedder:
    """The real embedder; records each document call's texts and refuses any text holding `reject`."""

    def __init__(self, inner: Any, reject: str | None = None) -> None:
        self._inner, self._reject = inner, reject
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        if self._reject is not None and any(self._reject in t for t in texts):
            raise ValueError(f"cannot embed {self._reject}")
        return self._inner.embed_documents(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_burst_is_embedded_in_shared_calls_with_each_item_s_own_vector(app: LocalApp) -> None:
    """embed_many: a batch's items are embedded in one call (the tokenizer reads them together), and each
    stored vector is the one its item gets embedded alone."""
    inner = app.container.embedder
    assert inner is not None
    recording = _RecordingEmbedder(inner)
    app.container.embedder = recording  # type: ignore[assignment]
    items = {f"e{i}": f"Observation {i}: the planarian{i} head regrows." for i in range(10)}
    _ingest(app, items)
    app.drain()
    assert {s["indexing_status"] for s in _statuses(app, list(items)).values()} == {"completed"}
    assert sorted(t for call in recording.calls for t in call) == sorted(
        f"Note {i}\n# Note {i}\n\n{t}" for i, t in items.items()
    )
    assert len(recording.calls) < len(items) and max(len(c) for c in recording.calls) > 1
    idx = app.container.search_index
    assert idx is not None
    for item_id in items:
        (doc,) = idx.item_chunks(_org(app), DB, "", "knowledge", item_id)
        alone = inner.embed_documents([f"Note {item_id}\n{doc.text}"])[0]
        assert doc.vector is not None and float(doc.vector @ alone) > 0.9999


def test_an_item_the_batch_embedder_call_rejects_fails_alone(app: LocalApp) -> None:
    inner = app.container.embedder
    app.container.embedder = _RecordingEmbedder(inner, reject="poison")  # type: ignore[assignment]
    _ingest(app, {"f1": "A fine note.", "bad": "A poison note.", "f2": "Another fine note."})
    app.drain()
    statuses = _statuses(app, ["f1", "bad", "f2"])
    assert statuses["f1"]["indexing_status"] == statuses["f2"]["indexing_status"] == "completed"
    assert statuses["bad"]["indexing_status"] == "errored"
    assert _texts(app, "bad") == [] and _texts(app, "f2") == ["# Note f2\n\nAnother fine note."]
