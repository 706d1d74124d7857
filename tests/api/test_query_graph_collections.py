"""The graph context of an answer drawn from several collections reads all their graphs at once (issue 28 goal 7).

Each collection has a graph of its own; a query into 100 weighted collections meets ~9 of them. Their reads are one
GraphStore.read_many per step (one round trip at the embedded engine), and the answer is the one reading each graph
in turn gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore
from ctxstore.ports.graph import GraphRead, GraphResult
from ctxstore.services.query import service as query_service
from tests.support.app import LocalApp, make_app
from tests.support.relations import ingest_related_note

ITEMS = {  # collection: (text, source, target, predicate)
    "c1": ("Ada Lovelace wrote the first program for the Analytical Engine.", "ada", "engine", "programmed"),
    "c2": ("Charles Babbage designed the Analytical Engine in 1837.", "charles", "engine", "designed"),
    "c3": ("Ada Lovelace corresponded with Charles Babbage about the Engine.", "ada", "charles", "corresponded_with"),
}
QUERY = {"query": "Ada Lovelace Charles Babbage Analytical Engine", "mode": "fast", "graph_context": True}


@pytest.fixture(scope="module")
def la(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    app = make_app(Path(tmp_path_factory.mktemp("graph-collections")) / "data", extractor="none")
    app.create_ready_database("acme")
    for collection, (text, s, t, predicate) in ITEMS.items():
        ingest_related_note(app, f"note-{collection}", text, (s, t, predicate), collection=collection)
    app.drain()
    yield app
    app.close()


def _graph_context(la: LocalApp) -> dict[str, Any]:
    body = {"database": "acme", "collections": {"c1": 1.0, "c2": 0.5, "c3": 0.8}, **QUERY}
    r = la.client.post("/query", json=body, headers=la.headers())
    assert r.status_code == 200, r.text
    gc: dict[str, Any] = r.json()["data"]["graph_context"]
    return gc


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The collections of every GraphStore.read_many call from now on, a sorted list per call."""
    calls: list[list[str]] = []
    real = FalkorGraphStore.read_many

    def counted(self: FalkorGraphStore, org: str, reads: Sequence[GraphRead]) -> list[GraphResult]:
        calls.append(sorted(graph.rsplit(":", 1)[-1] for graph, _, _ in reads))
        return real(self, org, reads)

    monkeypatch.setattr(FalkorGraphStore, "read_many", counted)
    return calls


def test_an_answer_from_three_collections_has_the_relations_of_each(la: LocalApp) -> None:
    gc = _graph_context(la)
    predicates = {t["relation"]["canonical_predicate"] for g in gc["chunk_relations"] for t in g["triplets"]}
    assert predicates == {"programmed", "designed", "corresponded_with"}


def test_batched_reads_answer_as_reading_each_graph_in_turn(la: LocalApp, monkeypatch: pytest.MonkeyPatch) -> None:
    batched = _graph_context(la)

    def in_turn(self: FalkorGraphStore, org: str, reads: Sequence[GraphRead]) -> list[GraphResult]:
        return [self.query(org, graph, cypher, params, read_only=True) for graph, cypher, params in reads]

    monkeypatch.setattr(FalkorGraphStore, "read_many", in_turn)
    assert batched == _graph_context(la)


def test_every_graph_is_read_in_one_call_per_step(la: LocalApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks' relations in the three graphs are one read_many; their entities' neighbourhoods one more."""
    calls = _count_reads(monkeypatch)
    gc = _graph_context(la)
    assert gc["chunk_relations"] and gc["query_paths"]
    assert calls == [["c1", "c2", "c3"], ["c1", "c2", "c3"]], calls


def test_a_collection_whose_answered_items_hold_no_relation_is_not_read(
    la: LocalApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An item whose graph step finished with no relation (`relations_created` 0) has no evidence edge to find: its
    collection's graph is not read, and the graph context is the one reading it too gives."""
    note = {"id": "note-plain", "title": "party", "type": "note", "content": {"text": "Ada Lovelace met Babbage."}}
    form = {"database": "acme", "collection": "plain", "app_knowledge": json.dumps([note])}
    r = la.client.post("/context/ingest", headers=la.headers(), data=form)
    assert r.status_code == 202, r.text
    la.drain()
    body = {"database": "acme", "collections": {"c1": 1.0, "c2": 1.0, "c3": 1.0, "plain": 1.0}, **QUERY}
    calls = _count_reads(monkeypatch)
    skipped = la.client.post("/query", json=body, headers=la.headers()).json()["data"]
    assert "plain" in {c["collection"] for c in skipped["chunks"]}, "the plain note must be in the answer"
    assert calls[0] == ["c1", "c2", "c3"] and all("plain" not in graphs for graphs in calls), calls
    calls.clear()
    monkeypatch.setattr(query_service, "may_relate", lambda record: True)
    read_all = la.client.post("/query", json=body, headers=la.headers()).json()["data"]
    assert calls[0] == ["c1", "c2", "c3", "plain"], calls
    assert skipped["graph_context"] == read_all["graph_context"]
    assert skipped["graph_context"]["chunk_relations"]
