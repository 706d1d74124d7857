"""Ingestion and /query over a search index whose writes lag (a strict AOSS fake with a 60 s refresh),
next to the local SQLite index: what users see while copies of an item's chunks coexist, and what
`completed` means.

A real local app (records, blobs, queue, the local embedding model) with its search index swapped for the
OpenSearch adapter on tests/aws/fake_opensearch.py, whose clock the test moves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.credentials import Credentials

from ctxstore.adapters.aws.opensearch_index import OpenSearchIndex, opensearch_client
from ctxstore.domain.items import ItemRef
from ctxstore.pipeline.ingest_steps import IngestSteps
from ctxstore.pipeline.jobs import ingest_pipeline
from ctxstore.pipeline.retry_policy import TransientError
from ctxstore.pipeline.search_visibility import SearchVisibility
from ctxstore.services.items.service import ITEM
from tests.aws.fake_opensearch import FakeClock, FakeCollection, RecordingAdapter, connection_class
from tests.support.app import LocalApp, make_app

DB = "d"
REFRESH = 60.0


class World:
    def __init__(self, app: LocalApp, backend: str) -> None:
        self.app = app
        self.backend = backend
        self.org = app.services.keys.authenticate(app.key).org
        self.clock = FakeClock(1000.0)
        self.coll = FakeCollection(refresh_delay=REFRESH, clock=self.clock)
        if backend == "opensearch":
            assert app.container.embedder is not None
            client = opensearch_client(
                "https://abc123.us-east-1.aoss.amazonaws.com",
                "us-east-1",
                Credentials("AKIDTEST", "secret"),
                connection_class=connection_class(RecordingAdapter(self.coll)),
            )
            app.container.search_index = OpenSearchIndex(client, dimension=app.container.embedder.dim)
            app.container.search_index.ensure_database(self.org, DB)

    def refresh(self) -> None:
        self.clock.advance(REFRESH)

    def ingest(self, item_id: str, text: str, *, drain: bool = True) -> None:
        item = {"id": item_id, "title": item_id, "type": "note", "content": {"text": text}}
        r = self.app.client.post(
            "/context/ingest", data={"database": DB, "app_knowledge": json.dumps([item])}, headers=self.app.headers()
        )
        assert r.status_code == 202, r.text
        if drain:
            self.app.drain()

    def query(self, text: str, **extra: Any) -> list[tuple[str, str]]:
        """(item id, chunk text) of each chunk /query answers."""
        body = {"database": DB, "query": text, "mode": "fast", "query_by": "text", "max_results": 10, **extra}
        r = self.app.client.post("/query", json=body, headers=self.app.headers())
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        assert {s["id"] for s in data["sources"]} == {c["id"] for c in data["chunks"]}
        return [(c["id"], c["chunk_content"]) for c in data["chunks"]]

    def ref(self, item_id: str) -> ItemRef:
        return ItemRef(DB, "", "knowledge", item_id)

    def record(self, item_id: str) -> dict[str, Any]:
        rec = self.app.services.items.get(self.org, self.ref(item_id))
        assert rec is not None
        return dict(rec.data)


@pytest.fixture(params=["sqlite", "opensearch"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    app = make_app(tmp_path / "data", extractor="none")
    app.create_ready_database(DB)
    w = World(app, request.param)
    yield w
    app.close()


@pytest.fixture
def aoss(tmp_path: Path) -> Iterator[World]:
    app = make_app(tmp_path / "data", extractor="none")
    app.create_ready_database(DB)
    w = World(app, "opensearch")
    yield w
    app.close()


# -- the query path: chunks of a missing record or of another version are never returned ----------------------


def test_a_chunk_whose_item_record_is_gone_is_not_returned(world: World) -> None:
    world.ingest("x", "The zqalpha lighthouse keeper logs every storm.")
    world.ingest("y", "A zqalpha zqalpha zqalpha note about the zqalpha harbour.")
    world.refresh()
    assert len(world.query("zqalpha")) == 2
    ref = world.ref("y")
    world.app.container.records.delete(world.org, ITEM, ref.pk, ref.item_id)  # the chunks stay indexed
    assert [i for i, _ in world.query("zqalpha")] == ["x"]
    # max_results 1: y ranked first (more matches) is skipped and the next candidate fills its place
    assert [i for i, _ in world.query("zqalpha", max_results=1)] == ["x"]


def test_chunks_of_an_older_version_are_not_returned(aoss: World) -> None:
    """v2 re-ingests x before v1's chunks are searchable: the replace's delete cannot see them, so both
    versions are in the index after the refresh. /query shows v2 only."""
    aoss.ingest("x", "First zqold version of the lighthouse log.")
    aoss.ingest("x", "Second zqnew version of the lighthouse log.")
    aoss.refresh()
    assert aoss.app.container.search_index.count(aoss.org, DB, "knowledge") == 2  # type: ignore[union-attr]
    assert aoss.query("zqold") == []
    ((item, text),) = aoss.query("zqnew lighthouse")
    assert item == "x" and "zqnew" in text


def test_a_deleted_item_whose_chunks_show_later_is_not_returned(aoss: World) -> None:
    aoss.ingest("x", "The zqgone lighthouse log.")
    r = aoss.app.client.request("DELETE", "/context", json={"database": DB, "ids": ["x"]}, headers=aoss.app.headers())
    assert r.status_code == 200, r.text
    aoss.refresh()  # the delete ran before the chunk was searchable: it shows now
    assert aoss.app.container.search_index.count(aoss.org, DB, "knowledge") == 1  # type: ignore[union-attr]
    assert aoss.query("zqgone") == []


# -- completed means searchable ---------------------------------------------------------------------------------


def _steps(w: World, *, wait_s: float) -> IngestSteps:
    visibility = SearchVisibility(wait_s=wait_s, poll_s=5.0, clock=w.clock, sleep=w.clock.advance)
    return IngestSteps(
        ingest_pipeline(w.app.services),
        w.app.container.blobs,
        search=lambda: w.app.container.search_index,
        visibility=visibility,
    )


def _index_task(w: World, steps: IngestSteps, item_id: str) -> dict[str, Any]:
    """What the state machine runs before Complete: Parse, the Embed batches, Index."""
    ev = {"org": w.org, "ref": w.ref(item_id).to_json(), "version": w.record(item_id)["version"]}
    parsed = steps.parse(ev)
    ev["work"] = parsed["work"]
    for batch in parsed["batches"]:
        steps.embed({**ev, "batch": batch})
    assert steps.index(ev)["outcome"] == "continue"
    return {**ev, "relations": 0}


def test_complete_waits_until_a_search_sees_the_chunks(aoss: World) -> None:
    steps = _steps(aoss, wait_s=40.0)
    aoss.ingest("x", "The zqwait lighthouse log. " * 200, drain=False)
    ev = _index_task(aoss, steps, "x")
    chunks = aoss.record("x")["chunk_count"]
    assert chunks > 1 and aoss.record("x")["status"] == "graph_creation"
    aoss.clock.advance(25.0)  # the graph step's time
    assert aoss.query("zqwait") == []  # not searchable yet
    start = aoss.clock()
    assert steps.complete(ev) == {"outcome": "completed"}
    assert REFRESH - 25.0 <= aoss.clock() - start < REFRESH - 25.0 + 5.0  # polled until the refresh, no longer
    assert aoss.record("x")["status"] == "completed"
    assert len(aoss.query("zqwait", max_results=50)) == chunks


def test_complete_past_its_wait_is_retried_and_the_item_stays_graph_creation(aoss: World) -> None:
    steps = _steps(aoss, wait_s=20.0)
    aoss.ingest("x", "The zqslow lighthouse log.", drain=False)
    ev = _index_task(aoss, steps, "x")
    with pytest.raises(TransientError, match="0 of 1 chunks"):
        steps.complete(ev)
    assert aoss.record("x")["status"] == "graph_creation"
    aoss.clock.advance(30.0)  # Step Functions' retry, later
    assert steps.complete(ev) == {"outcome": "completed"}


def test_a_retried_index_task_is_settled_before_completed(aoss: World) -> None:
    """The Index task ran twice (its first bulk landed, then the task timed out and was retried): two copies
    of every chunk. Complete deletes the second copies; after the refresh count is exact."""
    steps = _steps(aoss, wait_s=90.0)
    aoss.ingest("x", "The zqtwice lighthouse log. " * 200, drain=False)
    ev = _index_task(aoss, steps, "x")
    assert steps.index(ev)["outcome"] == "continue"
    chunks = aoss.record("x")["chunk_count"]
    index = aoss.app.container.search_index
    assert index is not None
    aoss.refresh()
    assert index.count(aoss.org, DB, "knowledge") == 2 * chunks
    assert len(aoss.query("zqtwice", max_results=50)) == chunks  # no duplicate shows meanwhile
    assert steps.complete(ev) == {"outcome": "completed"}
    aoss.refresh()
    assert index.count(aoss.org, DB, "knowledge") == chunks


def test_an_index_that_shows_writes_at_once_does_not_wait(world: World) -> None:
    if world.backend == "opensearch":
        world.coll.refresh_delay = 0.0
    steps = _steps(world, wait_s=0.0)
    world.ingest("x", "The zqnow lighthouse log.", drain=False)
    ev = _index_task(world, steps, "x")
    start = world.clock()
    assert steps.complete(ev) == {"outcome": "completed"}
    assert world.clock() == start
