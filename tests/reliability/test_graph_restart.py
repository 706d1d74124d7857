"""The entity and item graphs of a collection holding 50,000+ edges survive a restart of a real server.

FINDINGS: replaying a large AOF with the module's default EFFECTS_THRESHOLD lost every edge; this
holds the same engine settings to the ingestion graphs. Edges are written through the graph service
in batched UNWINDs (as the graph step writes them), then read back over HTTP from `ctxstore serve`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ctxstore.domain.graph_keys import entity_id, graph_name
from ctxstore.services.graphs.entity_graph import EXTRACTED, EntityRow, ItemAccess, RelationRow
from ctxstore.services.graphs.item_graph import SourceProps
from tests.support.app import make_app
from tests.support.server import ServerProcess

ITEMS = 50
PER_ITEM = 1000  # 50,000 REL edges, plus GROUP and MENTIONS edges


def _all_relations(client: Any) -> tuple[int, int, set[str]]:
    groups = evidence = 0
    rids: set[str] = set()
    cursor = None
    while True:
        params: dict[str, Any] = {"database": "acme", "limit": 10000}
        if cursor is not None:
            params["cursor"] = cursor
        r = client.get("/context/relations", params=params)
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        groups += len(data["relations"])
        for g in data["relations"]:
            assert "truncated" not in g
            evidence += len(g["relations"])
            rids.update(e["relationship_id"] for e in g["relations"])
        cursor = data["next_cursor"]
        if cursor is None:
            return groups, evidence, rids


@pytest.mark.slow
def test_graph_of_50k_edges_survives_server_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    la = make_app(data)
    key = la.key
    rng = random.Random(3)
    try:
        la.create_ready_database("acme")
        graphs = la.services.graphs
        assert graphs is not None
        graph = graph_name("knowledge", "acme", "")
        graphs._ensure_indexes("default", graph)
        ents = [
            EntityRow(entity_id(f"Org {i}", "organization", ""), f"Org {i}", "organization", "") for i in range(3000)
        ]
        for item in range(ITEMS):
            sid = f"item{item}"
            graphs.item_graph.upsert_source(
                "default",
                graph,
                SourceProps(sid, sid, "doc", "", "", "t1", None, "", True, float(item)),
                [(f"item{item - 1}", "references")] if item else [],
            )
            rels = []
            for j in range(PER_ITEM):  # distinct pairs per item, so no group exceeds its evidence cap
                a, b = ents[(item * 7 + j) % 3000], ents[(item * 13 + j * 3 + 1) % 3000]
                rels.append(
                    RelationRow(
                        a.eid, b.eid, "works with", "works_with", f"s{j}", rng.random(), None, f"{sid}#0", EXTRACTED
                    )
                )
            used = {r.source for r in rels} | {r.target for r in rels}
            n = graphs.entities.write_item(
                "default", graph, sid, [e for e in ents if e.eid in used], rels, ItemAccess("", True, 1.0, "")
            )
            assert n == PER_ITEM
        edges = la.container.graph.query(  # type: ignore[union-attr]
            "default", graph, "MATCH ()-[r:REL]->() RETURN count(r)", read_only=True
        ).rows[0][0]
        assert edges == ITEMS * PER_ITEM >= 50_000
        before = _all_relations(TestClient(la.app, headers=la.headers()))
        assert before[1] == ITEMS * PER_ITEM
    finally:
        la.close()

    with ServerProcess(data) as srv:
        srv.wait_ready(60)
        with srv.client(key) as c:
            after = _all_relations(c)
            assert after == before, "every group and every piece of evidence is back"
            r = c.get("/context/item0/subgraph", params={"database": "acme", "depth": 10, "max_sources": 1000})
            assert r.status_code == 200
            members = r.json()["data"]["sources"]
            assert len(members) == ITEMS and members[0]["source_id"] == "item0"
        assert srv.stop() == 0
