"""The graph context of a `fast` query costs two graph-engine round trips per collection (issue 28 goal 1).

With relations in the graph and graph context on, `fast` queries took 170-190 ms at 20k items on a machine
the ingestion's graph step kept busy: every round trip to the engine waits its turn there. The two reads
of the graph context (the relations of the ranked chunks, then the best groups around their entities)
returned whole nodes and edges, and the engine's client resolves their label, property and type ids with
three more queries (`db.labels()`, `db.propertyKeys()`, `db.relationshipTypes()`) on each fresh graph
handle, so a query made eight round trips. Counted here at the real engine (`INFO commandstats`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ctxstore.adapters.local.falkordb_engine import SOCKET_FILE
from tests.support.app import LocalApp, make_app
from tests.support.relations import ingest_related_note

ITEMS = [
    ("notes-1", "Ada Lovelace wrote the first program for the Analytical Engine.", "ada", "engine", "programmed"),
    ("notes-2", "Charles Babbage designed the Analytical Engine in 1837.", "charles", "engine", "designed"),
    ("notes-3", "Ada Lovelace corresponded with Charles Babbage for years.", "ada", "charles", "corresponded_with"),
]


@pytest.fixture(scope="module")
def la(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    app = make_app(Path(tmp_path_factory.mktemp("graph-trips")) / "data", extractor="none")
    app.create_ready_database("acme")
    for item_id, text, s, t, predicate in ITEMS:
        ingest_related_note(app, item_id, text, (s, t, predicate))
    app.drain()
    yield app
    app.close()


def _graph_commands(la: LocalApp) -> int:
    """GRAPH.* commands the engine has answered so far (queries, read-only queries, procedure calls)."""
    socket = (la.data_dir / "graph" / SOCKET_FILE).read_text()
    conn = redis.Redis(unix_socket_path=socket, decode_responses=True)
    try:
        stats: dict[str, Any] = conn.info("commandstats")
    finally:
        conn.close()
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_graph."))


def _query(la: LocalApp, **body: Any) -> dict[str, Any]:
    r = la.client.post("/query", json={"database": "acme", "mode": "fast", **body}, headers=la.headers())
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


def test_graph_context_reads_the_engine_twice(la: LocalApp) -> None:
    _query(la, query="Ada Lovelace and the Analytical Engine")  # the first query may start the engine's client
    before = _graph_commands(la)
    data = _query(la, query="who designed the Analytical Engine")
    trips = _graph_commands(la) - before
    gc = data["graph_context"]
    assert gc["chunk_relations"] and gc["query_paths"]  # both reads found something to answer
    assert trips == 2, f"{trips} round trips to the graph engine for one query's graph context"


def test_the_graph_context_names_entities_and_evidence(la: LocalApp) -> None:
    """The projected reads answer what the whole nodes and edges did."""
    data = _query(la, query="who designed the Analytical Engine")
    ranked = [c["chunk_uuid"] for c in data["chunks"]]
    gc = data["graph_context"]
    triplets = [t for g in gc["chunk_relations"] for t in g["triplets"]]
    designed = next(t for t in triplets if t["relation"]["canonical_predicate"] == "designed")
    assert designed["source"] == {
        "name": "Charles Babbage",
        "type": "PERSON",
        "namespace": "people",
        "entity_id": designed["source"]["entity_id"],
        "provider": "",
    }
    assert designed["target"]["name"] == "Analytical Engine" and designed["source"]["entity_id"]
    assert designed["relation"]["context"] == ITEMS[1][1] and designed["relation"]["origin"] == "byog"
    assert designed["relation"]["relationship_id"].startswith("rel_")
    assert isinstance(designed["relation"]["timestamp"], float) and designed["relation"]["confidence"] > 0
    for g in gc["chunk_relations"]:
        assert (
            g["source_chunk_ids"][0] in ranked
            and g["group_id"] in gc["chunk_id_to_group_ids"][g["source_chunk_ids"][0]]
        )
    scores = [g["relevancy_score"] for g in gc["query_paths"]]
    assert scores == sorted(scores, reverse=True) and len(scores) <= 20
    names = {t["source"]["name"] for g in gc["query_paths"] for t in g["triplets"]}
    assert names <= {"Ada Lovelace", "Charles Babbage"}
