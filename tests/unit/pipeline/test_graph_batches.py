"""Graph jobs claimed together (pipeline/graph_batches.py): one extraction call and shared graph and status
writes, with the same graph as one job at a time, and a crash mid-batch healed by running the jobs again."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import pytest

from ctxstore.domain.chunking import Chunk
from ctxstore.domain.graph_keys import graph_name
from ctxstore.domain.items import ItemRecord, ItemRef
from ctxstore.pipeline import graph_batches
from ctxstore.pipeline.graph_batches import GraphBatches
from ctxstore.pipeline.jobs import GRAPH_QUEUE, ingest_pipeline, queue_specs
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.ports.extractor import Extraction
from ctxstore.services.graphs.graph_rows import GraphRows
from tests.support.app import LocalApp
from tests.unit.pipeline.conftest import DB
from tests.unit.pipeline.conftest import org_of as _org

ONE_BY_ONE = "e"
TEXTS = [
    "Acme Corp acquired Beta Labs in 2019. Ada Lovelace is the CEO of Acme Corp.",
    "Beta Labs was founded by Grace Hopper in Boston.",
    "Grace Hopper works at Acme Corp. Ada Lovelace met Grace Hopper in London.",
    "Initech hired Peter Gibbons. Peter Gibbons lives in Austin.",
    "Acme Corp sued Initech in 2021.",
    "Nothing here names anyone.",
]


def _items() -> list[dict[str, Any]]:
    # Two items link to one id that is never ingested: both links must meet at a single ghost node.
    out: list[dict[str, Any]] = [
        {"id": f"n{i}", "title": f"Note {i}", "type": "note", "content": {"text": t}} for i, t in enumerate(TEXTS)
    ]
    out[0]["relates_to"] = out[1]["relates_to"] = [{"id": "missing", "relation": "references"}]
    return out


def _ingest(app: LocalApp, database: str) -> None:
    body = {"database": database, "app_knowledge": json.dumps(_items())}
    r = app.client.post("/context/ingest", data=body, headers=app.headers())
    assert r.status_code == 202, r.text


def _graph(app: LocalApp, database: str) -> dict[str, Any]:
    """Everything the graph step wrote in a database's graph, as comparable values."""
    store, org, name = app.container.graph, _org(app), graph_name("knowledge", database, "")
    assert store is not None

    def rows(q: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(row) for row in store.query(org, name, q, read_only=True).rows)

    return {
        "entities": rows("MATCH (e:Entity) RETURN e.eid, e.name, e.type"),
        # (chunk and evidence ids carry the database, so they are compared by count, not value)
        "rels": rows("MATCH (a)-[r:REL]->(b) RETURN a.eid, b.eid, r.item_id, r.raw, r.canon, r.context, r.confidence"),
        "ids": rows("MATCH ()-[r:REL]->() RETURN count(r), count(DISTINCT r.rid), count(DISTINCT r.chunk_id)"),
        "groups": rows("MATCH (a)-[g:GROUP]->(b) RETURN a.eid, b.eid, g.n, g.score"),
        "mentions": rows("MATCH (s:Source)-[:MENTIONS]->(e) RETURN s.sid, e.eid"),
        "sources": rows("MATCH (s:Source) RETURN s.sid, s.ghost, s.title"),
        "links": rows("MATCH (s:Source)-[l:LINKS]->(t) RETURN s.sid, t.sid, l.relation"),
    }


def _statuses(app: LocalApp, database: str) -> dict[str, tuple[str, int]]:
    ids = ",".join(i["id"] for i in _items())
    r = app.client.get("/context/status", params={"database": database, "ids": ids}, headers=app.headers())
    return {s["id"]: (s["indexing_status"], s.get("relations_created")) for s in r.json()["data"]["statuses"]}


class _CountingExtractor:
    """The real extractor; records how many texts each call carried."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, []  # type: ignore[var-annotated]

    def extract(self, text: str) -> Extraction:
        self.calls.append(1)
        return self.inner.extract(text)  # type: ignore[no-any-return]

    def extract_many(self, texts: list[str]) -> list[Extraction]:
        self.calls.append(len(texts))
        return self.inner.extract_many(texts)  # type: ignore[no-any-return]


def _one_by_one(app: LocalApp) -> LocalRunner:
    specs = [replace(s, batch_handler=None, batch=1) if s.name == GRAPH_QUEUE else s for s in queue_specs(app.services)]
    return LocalRunner(app.container.queue, specs)


def test_a_batch_of_graph_jobs_writes_the_same_graph_as_one_job_at_a_time(app: LocalApp) -> None:
    app.create_ready_database(ONE_BY_ONE)
    counting = _CountingExtractor(app.container.extractor)
    app.container.extractor = counting
    _ingest(app, ONE_BY_ONE)
    _one_by_one(app).drain()
    singles = list(counting.calls)
    counting.calls.clear()
    _ingest(app, DB)
    app.drain()
    # The batch reached the extractor in one call of all its texts; one job at a time, one call per item.
    assert singles == [1] * len(TEXTS)
    assert counting.calls == [len(TEXTS)]
    batched, alone = _graph(app, DB), _graph(app, ONE_BY_ONE)
    assert batched == alone
    assert len(batched["rels"]) >= 5 and [s for s in batched["sources"] if s[0] == "missing"] == [
        ("missing", True, None)
    ]
    assert _statuses(app, DB) == _statuses(app, ONE_BY_ONE)
    assert {s for s, _ in _statuses(app, DB).values()} == {"completed"}


class _Crash(BaseException):
    """The process dies: nothing after it runs, no job is acknowledged."""


class _DiesAfterTheGraphWrite:
    """The real graph service; the process dies right after the batch's graph write, before its statuses."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def prepare_many(self, org: str, items: Sequence[tuple[ItemRef, list[Chunk]]]) -> list[GraphRows]:
        return self.inner.prepare_many(org, items)  # type: ignore[no-any-return]

    def write_many(self, org: str, items: Sequence[tuple[ItemRef, ItemRecord, GraphRows]]) -> list[int]:
        self.inner.write_many(org, items)
        raise _Crash()


def test_a_crash_mid_batch_reruns_the_unacknowledged_jobs_without_duplicates(app: LocalApp) -> None:
    app.create_ready_database(ONE_BY_ONE)
    _ingest(app, ONE_BY_ONE)
    app.drain()
    clean = _graph(app, ONE_BY_ONE)
    _ingest(app, DB)
    specs = queue_specs(app.services)
    LocalRunner(app.container.queue, [s for s in specs if s.name != GRAPH_QUEUE]).drain()  # searchable only
    jobs = app.container.queue.claim(GRAPH_QUEUE, lease_s=0.3, limit=32)
    assert len(jobs) == len(TEXTS)
    batches = GraphBatches(
        ingest_pipeline(app.services), app.services.items, _DiesAfterTheGraphWrite(app.services.graphs)
    )
    with pytest.raises(_Crash):
        batches.handle(jobs)
    assert {s for s, _ in _statuses(app, DB).values()} == {"graph_creation"}
    time.sleep(0.4)  # the dead worker's leases run out
    app.drain()
    assert {s for s, _ in _statuses(app, DB).values()} == {"completed"}
    assert _graph(app, DB) == clean
    assert _statuses(app, DB) == _statuses(app, ONE_BY_ONE)


class _PartsWatcher:
    """The real graph service; the write of part k waits (up to 5 s) until the extraction of part k + 1 has begun,
    and the first part's extraction until the second's has."""

    def __init__(self, inner: Any, parts: int) -> None:
        self.inner, self.parts = inner, parts
        self.log: list[str] = []
        self.begun = threading.Condition()
        self.prepares = self.writes = 0

    def prepare_many(self, org: str, items: Sequence[tuple[ItemRef, list[Chunk]]]) -> list[GraphRows]:
        with self.begun:
            self.prepares += 1
            self.begun.notify_all()
            # The first part's extraction ends only once the second's has begun: two parts are in flight.
            ahead = self.prepares > 1 or self.begun.wait_for(lambda: self.prepares >= 2, timeout=5)
            self.log.append(f"prepare {len(items)} ahead={ahead}")
        return self.inner.prepare_many(org, items)  # type: ignore[no-any-return]

    def write_many(self, org: str, items: Sequence[tuple[ItemRef, ItemRecord, GraphRows]]) -> list[int]:
        with self.begun:
            wanted = min(self.writes + 2, self.parts)
            overlapped = self.begun.wait_for(lambda: self.prepares >= wanted, timeout=5)
            self.writes += 1
            self.log.append(f"write {len(items)} overlapped={overlapped}")
        return self.inner.write_many(org, items)  # type: ignore[no-any-return]


def test_a_large_batch_is_extracted_in_parts_while_the_part_before_is_written(
    app: LocalApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extraction processes never wait on the graph writes: the next part is being extracted while a part is
    written (2,000 SciFact abstracts: the processes busy 92 % of the graph tail, ~85 % one part at a time)."""
    monkeypatch.setattr(graph_batches, "PART_ITEMS", 2)
    app.create_ready_database(ONE_BY_ONE)
    _ingest(app, ONE_BY_ONE)
    _one_by_one(app).drain()
    _ingest(app, DB)
    specs = queue_specs(app.services)
    LocalRunner(app.container.queue, [s for s in specs if s.name != GRAPH_QUEUE]).drain()  # searchable only
    jobs = app.container.queue.claim(GRAPH_QUEUE, lease_s=60, limit=32)
    assert len(jobs) == len(TEXTS) == 6
    watcher = _PartsWatcher(app.services.graphs, parts=3)
    assert GraphBatches(ingest_pipeline(app.services), app.services.items, watcher).handle(jobs) == [None] * 6
    for job in jobs:
        app.container.queue.complete(job)
    # Parts of 2, two in flight: the extraction of the part after a part had begun before that part was written.
    assert sorted(watcher.log[:2]) == ["prepare 2 ahead=True"] * 2
    assert [entry for entry in watcher.log if entry.startswith("write")] == ["write 2 overlapped=True"] * 3
    assert _graph(app, DB) == _graph(app, ONE_BY_ONE)
    assert _statuses(app, DB) == _statuses(app, ONE_BY_ONE)


@pytest.mark.parametrize(
    ("extraction", "backend", "batch"),
    [
        ({"extractor": "rules", "extractor_processes": 2}, "local", 1024),  # the local pool: batch ends cost it
        ({"extractor": "rules", "extractor_processes": 0}, "local", 256),  # in the worker threads
        ({"extractor": "llm"}, "local", 8),  # a model call per text: the batch must end within its lease
        ({"extractor": "bedrock"}, "aws", 8),
        ({"extractor": "rules", "extractor_processes": 2}, "aws", 256),  # Lambda runs no process pool
    ],
)
def test_graph_jobs_are_claimed_by_the_thousand_only_for_the_local_extraction_pool(
    extraction: dict[str, Any], backend: Literal["local", "aws"], batch: int
) -> None:
    from ctxstore.config import ExtractionSettings, Settings
    from ctxstore.pipeline.jobs import graph_batch
    from ctxstore.runtime.capabilities import capabilities_of

    settings = Settings.model_construct(backend=backend, extraction=ExtractionSettings.model_construct(**extraction))
    assert graph_batch(settings, capabilities_of(settings)) == batch


def test_serve_claims_graph_jobs_in_batches_of_its_extraction_pool(
    app: LocalApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = app.services.container
    pooled = container.settings.extraction.model_copy(update={"extractor": "rules", "extractor_processes": 2})
    monkeypatch.setattr(container, "settings", container.settings.model_copy(update={"extraction": pooled}))
    assert container.capabilities.single_process
    [spec] = [s for s in queue_specs(app.services) if s.name == GRAPH_QUEUE]
    assert spec.batch == 1024
