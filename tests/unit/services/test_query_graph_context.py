"""The query service's side of the GraphContextSource seam, with a fake source on a real local index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.retrieval.graph_context import GraphContextRequest
from ctxstore.services.access.principal import Principal
from ctxstore.services.query.service import QueryService
from tests.support.app import LocalApp, make_app


class FakeGraph:
    def __init__(self) -> None:
        self.requests: list[GraphContextRequest] = []

    def graph_context(self, request: GraphContextRequest) -> dict[str, Any]:
        self.requests.append(request)
        group = f"grp-{request.store}"
        return {
            "chunk_relations": [{"group_id": group, "relevancy_score": 1.0, "triplets": [], "source_chunk_ids": []}],
            "query_paths": [],
            "chunk_id_to_group_ids": {cid: [group] for cid in request.chunk_ids},
        }


@pytest.fixture(scope="module")
def la(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    app = make_app(Path(tmp_path_factory.mktemp("qgc")) / "data")
    app.create_ready_database("acme")
    notes = [
        {"id": f"n{i}", "title": f"N{i}", "type": "note", "content": {"text": f"lighthouse keeper log {i}"}}
        for i in range(3)
    ]
    app.client.post(
        "/context/ingest", headers=app.headers(), data={"database": "acme", "app_knowledge": json.dumps(notes)}
    )
    app.client.post(
        "/context/ingest",
        headers=app.headers(),
        data={"database": "acme", "type": "memory", "memories": json.dumps([{"id": "m1", "text": "lighthouse visit"}])},
    )
    app.drain()
    yield app
    app.close()


def _service(la: LocalApp, graph: FakeGraph | None) -> QueryService:
    s, c = la.services, la.services.container
    index = c.search_index
    assert index is not None  # the local app always has one
    return QueryService(
        c.clock,
        s.databases,
        s.items,
        search_index=lambda: index,
        embedder=lambda: c.embedder,
        reranker=lambda: c.reranker,
        graph_context=graph,
    )


def _principal(la: LocalApp) -> Principal:
    return la.services.keys.authenticate(la.key)


def test_request_carries_the_ranked_chunks_and_items(la: LocalApp) -> None:
    graph = FakeGraph()
    out = _service(la, graph).query(_principal(la), {"database": "acme", "query": "lighthouse keeper", "mode": "fast"})
    [req] = graph.requests
    # The notes' graph step found no relation (relations_created 0): their collection's graph is not to be read.
    assert req.store == "knowledge" and req.database == "acme" and list(req.collections) == []
    assert list(req.chunk_ids) == [c["chunk_uuid"] for c in out["chunks"]]
    assert list(req.item_ids) == [c["id"] for c in out["chunks"]] and req.query == "lighthouse keeper"
    assert out["graph_context"]["chunk_id_to_group_ids"] == {c["chunk_uuid"]: ["grp-knowledge"] for c in out["chunks"]}


def test_type_all_asks_each_store_and_merges(la: LocalApp) -> None:
    graph = FakeGraph()
    out = _service(la, graph).query(
        _principal(la), {"database": "acme", "query": "lighthouse", "mode": "fast", "type": "all"}
    )
    assert sorted(r.store for r in graph.requests) == ["knowledge", "memory"]
    assert sorted(g["group_id"] for g in out["graph_context"]["chunk_relations"]) == ["grp-knowledge", "grp-memory"]


def test_not_asked_when_disabled_or_routed_fast_or_unwired(la: LocalApp) -> None:
    graph = FakeGraph()
    svc = _service(la, graph)
    off = svc.query(_principal(la), {"database": "acme", "query": "lighthouse", "mode": "fast", "graph_context": False})
    assert "graph_context" not in off and graph.requests == []
    thinking = svc.query(
        _principal(la), {"database": "acme", "query": "lighthouse", "mode": "thinking", "graph_context": False}
    )
    assert "graph_context" not in thinking and graph.requests == []
    auto = svc.query(_principal(la), {"database": "acme", "query": "lighthouse keeper log 1", "mode": "auto"})
    assert (auto["query_plan"]["mode"] == "thinking") == ("graph_context" in auto)
    assert len(graph.requests) == (1 if auto["query_plan"]["mode"] == "thinking" else 0)
    none = _service(la, None).query(_principal(la), {"database": "acme", "query": "lighthouse", "mode": "fast"})
    assert "graph_context" not in none
