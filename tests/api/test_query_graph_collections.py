"""The graph context of an answer drawn from several collections reads their graphs side by side (issue 28 goal 7).

Each collection has a graph of its own; a query into 100 weighted collections meets ~10 of them, and one read
after the other took 2.4-3.0 ms where one graph took 0.8-0.9. The reads now overlap, and the answer is the same as
reading one graph after the other gives.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ctxstore.services.graphs import answer_context
from ctxstore.services.graphs.entity_graph import EntityGraph
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


def test_an_answer_from_three_collections_has_the_relations_of_each(la: LocalApp) -> None:
    gc = _graph_context(la)
    predicates = {t["relation"]["canonical_predicate"] for g in gc["chunk_relations"] for t in g["triplets"]}
    assert predicates == {"programmed", "designed", "corresponded_with"}


def test_side_by_side_reads_answer_as_one_after_the_other(la: LocalApp, monkeypatch: pytest.MonkeyPatch) -> None:
    side_by_side = _graph_context(la)
    with ThreadPoolExecutor(max_workers=1) as one_at_a_time:
        monkeypatch.setattr(answer_context, "_READS", one_at_a_time)
        in_turn = _graph_context(la)
    assert side_by_side == in_turn


def test_the_collections_graphs_are_read_side_by_side(la: LocalApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each read of the relations of the ranked chunks is held 0.2 s at the engine's client: three collections
    answer in well under three times that, with the reads in flight together."""
    real = EntityGraph.chunk_edges
    lock = threading.Lock()
    in_flight = [0, 0]  # now, most

    def held(self: EntityGraph, org: str, graph: str, chunk_ids: Sequence[str], cap: int) -> Any:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        try:
            time.sleep(0.2)
            return real(self, org, graph, chunk_ids, cap)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(EntityGraph, "chunk_edges", held)
    started = time.perf_counter()
    gc = _graph_context(la)
    took = time.perf_counter() - started
    assert gc["chunk_relations"]
    assert in_flight[1] == 3, f"at most {in_flight[1]} graph reads in flight"
    assert took < 0.5, f"{took:.2f} s for three graphs held 0.2 s each"
