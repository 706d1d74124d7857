"""Issue 12 items 1-3, each interleaving forced in a chosen order on the real local stores.

The HTTP rounds (tests/reliability/test_item_races.py) show the races end to end; these pin the orders
that lost data before: a delete between a version's embed and its index step, or between its index and
graph steps; an older version's index step after a newer version finished; a metadata merge whose chunk
write lands after a later merge's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from ctxstore.domain.items import ItemRef
from ctxstore.pipeline.ingest_pipeline import IngestPipeline, StaleJob
from ctxstore.pipeline.jobs import ingest_pipeline
from ctxstore.ports.search_index import ChunkDoc
from tests.support.app import LocalApp
from tests.unit.pipeline.conftest import DB
from tests.unit.pipeline.conftest import org_of as _org

REF = ItemRef(DB, "", "knowledge", "x")


def _accept(app: LocalApp, text: str, entity: str = "Alice") -> str:
    """Accept one version of item x (nothing runs yet) and answer its version."""
    graph = {
        "x": {
            "entities": {"a": {"name": entity, "type": "PERSON"}, "b": {"name": "Acme", "type": "ORG"}},
            "relations": [{"source": "a", "target": "b", "predicate": "works at", "context": text[:30]}],
        }
    }
    form = {
        "database": DB,
        "app_knowledge": json.dumps([{"id": "x", "title": text[:8], "type": "note", "content": {"text": text}}]),
        "graph_payload": json.dumps(graph),
    }
    r = app.client.post("/context/ingest", data=form, headers=app.headers())
    assert r.status_code == 202, r.text
    rec = app.services.items.get(_org(app), REF)
    assert rec is not None
    return str(rec.data["version"])


def _embedded(p: IngestPipeline, org: str, version: str) -> tuple[list[Any], list[ChunkDoc]]:
    record = p.begin(org, REF, version)
    assert record is not None
    chunks = p.parse_and_chunk(org, REF, version, record)
    assert chunks is not None
    return chunks, p.embed(org, REF, record, chunks)


def _indexed_texts(app: LocalApp, org: str) -> list[str]:
    idx = app.container.search_index
    assert idx is not None
    return [d.text for d in idx.item_chunks(org, DB, "", "knowledge", "x")]


def _relations(app: LocalApp) -> list[Any]:
    r = app.client.get("/context/relations", params={"database": DB}, headers=app.headers())
    return list(r.json()["data"]["relations"])


def _delete(app: LocalApp) -> None:
    r = app.client.request("DELETE", "/context", json={"database": DB, "ids": ["x"]}, headers=app.headers())
    assert r.status_code == 200 and r.json()["data"]["deleted_count"] == 1, r.text


def test_delete_between_embed_and_index_writes_nothing(app: LocalApp) -> None:
    org, p = _org(app), ingest_pipeline(app.services)
    _accept(app, "first version of x")
    app.drain()
    v2 = _accept(app, "second version of x with new words")
    _, docs = _embedded(p, org, v2)
    _delete(app)
    with pytest.raises(StaleJob):
        p.publish(org, REF, v2, docs)
    assert _indexed_texts(app, org) == []
    assert _relations(app) == []
    app.drain()  # the queued job of v2 finds nothing to do
    assert _indexed_texts(app, org) == [] and _relations(app) == []


def test_delete_between_index_and_graph_leaves_no_graph(app: LocalApp) -> None:
    org, p = _org(app), ingest_pipeline(app.services)
    v1 = _accept(app, "only version of x")
    chunks, docs = _embedded(p, org, v1)
    p.publish(org, REF, v1, docs)
    _delete(app)
    with pytest.raises(StaleJob):
        p.graph(org, REF, v1, chunks)
    assert _relations(app) == [] and _indexed_texts(app, org) == []


def test_an_older_version_finishing_last_changes_nothing(app: LocalApp) -> None:
    org, p = _org(app), ingest_pipeline(app.services)
    v1 = _accept(app, "older text " * 300, entity="Old")
    v2 = _accept(app, "newer text", entity="New")
    chunks1, docs1 = [], []
    with pytest.raises(StaleJob):  # v1 is already replaced when its job begins
        chunks1, docs1 = _embedded(p, org, v1)
    c2, d2 = _embedded(p, org, v2)
    p.publish(org, REF, v2, d2)
    p.complete(org, REF, v2, p.graph(org, REF, v2, c2))
    # Even a v1 job that got past its begin step before v2 was accepted cannot write at index or graph time.
    with pytest.raises(StaleJob):
        p.publish(org, REF, v1, d2)
    with pytest.raises(StaleJob):
        p.graph(org, REF, v1, c2)
    assert all("newer text" in t for t in _indexed_texts(app, org))
    names = json.dumps(_relations(app))
    assert "New" in names and "Old" not in names
    rec = app.services.items.get(org, REF)
    assert rec is not None and rec.data["version"] == v2 and rec.data["status"] == "completed"
    assert chunks1 == [] and docs1 == []


class _SlowFirstUpsert:
    """Delays the first metadata chunk write until a second one has had time to finish (or 1 s passes):
    the interleaving that lost keys. Every call goes to the real SQLite index."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.first_started = threading.Event()
        self.second_done = threading.Event()
        self._calls = 0
        self._lock = threading.Lock()

    def upsert(self, org: str, docs: Sequence[ChunkDoc]) -> None:
        with self._lock:
            self._calls += 1
            nth = self._calls
        if nth == 1:
            self.first_started.set()
            self.second_done.wait(1.0)
            self._inner.upsert(org, docs)
        else:
            self._inner.upsert(org, docs)
            self.second_done.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_metadata_merges_never_lose_keys_on_chunks(app: LocalApp) -> None:
    org = _org(app)
    _accept(app, "\n\n".join(f"Section {i} of a long text. " * 40 for i in range(6)))
    app.drain()
    shim = _SlowFirstUpsert(app.container.search_index)
    app.container.search_index = shim  # type: ignore[assignment]
    principal = app.services.keys.authenticate(app.key)

    def patch(key: str) -> None:
        app.services.catalog.update_metadata(principal, DB, "", "x", None, {key: "v"})

    a = threading.Thread(target=patch, args=("a",), daemon=True)
    a.start()
    assert shim.first_started.wait(5)
    time.sleep(0.05)
    b = threading.Thread(target=patch, args=("b",), daemon=True)
    b.start()
    a.join(10)
    b.join(10)
    idx = shim._inner
    docs = idx.item_chunks(org, DB, "", "knowledge", "x")
    assert len(docs) >= 2
    for d in docs:
        assert {"a", "b"} <= set(d.additional_metadata), d.additional_metadata


def test_a_job_claimed_before_its_record_is_written_waits_for_the_accept(app: LocalApp) -> None:
    """A worker woken by the enqueue can claim the job while the accept (holding the item's lock) has not
    written the record yet: the first attempt waits for that lock instead of failing into a retry."""
    from ctxstore.ports.records import Put
    from ctxstore.services.items.service import ITEM, new_version

    org = _org(app)
    _accept(app, "the first version of the note")
    p = ingest_pipeline(app.services)
    later = new_version()
    holding = threading.Event()

    def slow_accept() -> None:
        with app.services.items.lock(org, REF):
            holding.set()
            time.sleep(0.3)
            rec = app.services.items.get(org, REF)
            assert rec is not None
            app.container.records.put(
                org, Put(ITEM, REF.pk, REF.item_id, dict(rec.data, version=later), if_version=rec.version)
            )

    accept = threading.Thread(target=slow_accept)
    accept.start()
    assert holding.wait(5)
    p.run(org, REF, later, attempt=1)  # before the fix: TransientError("item record not updated yet")
    accept.join()
    rec = app.services.items.get(org, REF)
    assert rec is not None and rec.data["version"] == later
    assert rec.data["status"] in ("graph_creation", "completed")
    assert [t.endswith("the first version of the note") for t in _indexed_texts(app, org)] == [True]
