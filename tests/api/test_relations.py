"""GET /context/relations and the entity graph behind it: extraction, graph_payload, ACLs, deletes."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from ctxstore.adapters.models.spacy_extractor import SpacyExtractor
from ctxstore.ports.extractor import Extraction
from tests.support.app import LocalApp

TEXT = "Ada Lovelace joined Acme Corp in March 2024. Microsoft acquired GitHub in 2018."
PAYLOAD = {
    "entities": {
        "a": {"name": "Ada Lovelace", "type": "person", "namespace": ""},
        "b": {"name": "Acme Corp", "type": "organization", "namespace": ""},
        "c": {"name": "Babbage Ltd", "type": "organization", "namespace": ""},
    },
    "relations": [
        {
            "source": "a",
            "target": "b",
            "predicate": "works at",
            "context": "Ada is at Acme.",
            "temporal_details": "since 2024",
        },
        {"source": "a", "target": "c", "predicate": "advises", "context": "", "temporal_details": None},
    ],
}


@pytest.fixture
def db(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme")
    return local


def ingest(la: LocalApp, items: list[dict[str, Any]], graph_payload: dict[str, Any] | None = None, **form: str) -> Any:
    data = {"database": "acme", "app_knowledge": json.dumps(items), **form}
    if graph_payload is not None:
        data["graph_payload"] = json.dumps(graph_payload)
    r = la.client.post("/context/ingest", data=data, headers=la.headers())
    assert r.status_code == 202, r.text
    la.drain()
    return r.json()["data"]


def relations(la: LocalApp, **params: Any) -> Any:
    return la.client.get("/context/relations", params={"database": "acme", **params}, headers=la.headers())


def triples(data: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (g["source"]["name"], ev["canonical_predicate"], g["target"]["name"])
        for g in data["relations"]
        for ev in g["relations"]
    }


def status(la: LocalApp, item_id: str) -> dict[str, Any]:
    r = la.client.get("/context/status", params={"database": "acme", "ids": item_id}, headers=la.headers())
    return r.json()["data"]["statuses"][0]


def test_extracted_relations_with_evidence_and_iso_timestamps(db: LocalApp) -> None:
    ingest(db, [{"id": "n1", "title": "Notes", "content": {"text": TEXT}}])
    assert status(db, "n1")["indexing_status"] == "completed"
    r = relations(db)
    assert r.status_code == 200
    data = r.json()["data"]
    assert {("Ada Lovelace", "works_at", "Acme Corp"), ("Microsoft", "acquired", "GitHub")} <= triples(data)
    group = next(g for g in data["relations"] if g["source"]["name"] == "Microsoft")
    assert group["source"]["type"] == "organization" and group["source"]["entity_id"].startswith("ent_")
    assert group["source"]["identifier"] is None
    ev = group["relations"][0]
    assert ev["raw_predicate"] == "acquired"
    assert ev["context"] == "Microsoft acquired GitHub in 2018."
    assert ev["temporal_details"] == "in 2018"
    assert 0 < ev["confidence"] <= 1
    assert ev["chunk_id"] == group["chunk_id"] and ev["chunk_id"].startswith("n1#")
    assert ev["source_entity_id"] == group["source"]["entity_id"]
    assert isinstance(ev["timestamp"], str) and datetime.fromisoformat(ev["timestamp"].replace("Z", "+00:00"))
    assert "origin" not in ev
    assert data["is_truncated"] is False and data["next_cursor"] is None
    assert data["auxiliary_relations"] == [] and data["auxiliary_truncated"] is False


def test_relations_created_is_reported_on_the_status(db: LocalApp) -> None:
    ingest(db, [{"id": "n1", "content": {"text": TEXT}}])
    rec = db.services.items.find("default", "acme", "", "n1")
    assert rec is not None and rec[1].data["relations_created"] == 2


def test_mentions_merge_across_items(db: LocalApp) -> None:
    ingest(
        db,
        [
            {"id": "a", "content": {"text": "Ada Lovelace joined Acme Corp in 2024."}},
            {"id": "b", "content": {"text": "ada lovelace works at ACME Corp."}},
        ],
    )
    data = relations(db).json()["data"]
    ada = [g for g in data["relations"] if g["source"]["name"].lower() == "ada lovelace"]
    assert len(ada) == 1, "one node per normalised name + type + namespace"
    assert {e["chunk_id"].split("#")[0] for e in ada[0]["relations"]} == {"a", "b"}


def test_graph_payload_is_byog_replaces_extraction_persists_and_is_replaced(db: LocalApp) -> None:
    res = ingest(db, [{"id": "p1", "content": {"text": TEXT}}], {"p1": PAYLOAD})
    assert res["results"][0]["relations_created"] == 2
    data = relations(db, id="p1").json()["data"]
    assert triples(data) == {("Ada Lovelace", "works_at", "Acme Corp"), ("Ada Lovelace", "advises", "Babbage Ltd")}
    assert all(ev["origin"] == "byog" for g in data["relations"] for ev in g["relations"])
    ev = next(ev for g in data["relations"] for ev in g["relations"] if ev["raw_predicate"] == "works at")
    assert ev["temporal_details"] == "since 2024" and ev["context"] == "Ada is at Acme."

    # re-ingest without a payload: the stored one is reapplied (no extraction)
    ingest(db, [{"id": "p1", "content": {"text": "Microsoft acquired GitHub in 2018."}}])
    assert triples(relations(db, id="p1").json()["data"]) == triples(data)

    # a new payload replaces the whole graph
    new = {
        "entities": {"x": {"name": "Globex", "type": "organization"}, "y": {"name": "Paris", "type": "location"}},
        "relations": [
            {"source": "x", "target": "y", "predicate": "is based in", "context": "", "temporal_details": None}
        ],
    }
    ingest(db, [{"id": "p1", "content": {"text": TEXT}}], {"p1": new})
    assert triples(relations(db, id="p1").json()["data"]) == {("Globex", "located_in", "Paris")}
    assert triples(relations(db).json()["data"]) == {("Globex", "located_in", "Paris")}, "old entities left no edges"


def test_memory_graph_is_separate(db: LocalApp) -> None:
    r = db.client.post(
        "/context/ingest",
        data={"database": "acme", "type": "memory", "memories": json.dumps([{"id": "mem1", "text": TEXT}])},
        headers=db.headers(),
    )
    assert r.status_code == 202
    db.drain()
    assert relations(db).json()["data"]["relations"] == []
    assert ("Microsoft", "acquired", "GitHub") in triples(relations(db, type="memory").json()["data"])
    assert relations(db, id="mem1", type="memory").status_code == 200
    assert relations(db, id="mem1").status_code == 404


def test_unknown_id_is_404_source_not_found(db: LocalApp) -> None:
    r = relations(db, id="nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "SOURCE_NOT_FOUND"


def test_unknown_database_is_404(db: LocalApp) -> None:
    r = db.client.get("/context/relations", params={"database": "nope"}, headers=db.headers())
    assert r.status_code == 404 and r.json()["error"]["code"] == "DATABASE_NOT_FOUND"


@pytest.mark.parametrize("limit", ["0", "10001", "-1", "x"])
def test_limit_out_of_range_is_400(db: LocalApp, limit: str) -> None:
    r = relations(db, limit=limit)
    assert r.status_code == 400 and r.json()["success"] is False


def test_ranking_and_cursor_pages_through_every_group_once(db: LocalApp) -> None:
    names = [f"Person{i}" for i in range(7)]
    items = []
    gp: dict[str, Any] = {}
    for i, n in enumerate(names):
        items.append({"id": f"i{i}", "content": {"text": "x"}})
        gp[f"i{i}"] = {
            "entities": {"p": {"name": n, "type": "person"}, "o": {"name": "Acme", "type": "organization"}},
            "relations": [{"source": "p", "target": "o", "predicate": "works at"}] * (i + 1),
        }
    ingest(db, items, gp)
    first = relations(db, limit=3).json()["data"]
    assert first["is_truncated"] is True and isinstance(first["next_cursor"], float)
    assert [g["source"]["name"] for g in first["relations"]] == ["Person6", "Person5", "Person4"], "most evidence first"
    seen = [g["source"]["name"] for g in first["relations"]]
    cursor = first["next_cursor"]
    while cursor is not None:
        page = relations(db, limit=3, cursor=cursor).json()["data"]
        seen += [g["source"]["name"] for g in page["relations"]]
        cursor = page["next_cursor"]
    assert sorted(seen) == sorted(names) and len(seen) == len(names)
    assert relations(db, cursor="abc").status_code == 400


def test_acl_filters_relations(db: LocalApp) -> None:
    ingest(
        db,
        [
            {"id": "open", "content": {"text": "Microsoft acquired GitHub in 2018."}},
            {
                "id": "secret",
                "content": {"text": "Ada Lovelace joined Acme Corp in 2024."},
                "additional_metadata": {"acl": ["alice", "team-x"]},
            },
        ],
    )
    everyone = triples(relations(db).json()["data"])
    assert ("Ada Lovelace", "works_at", "Acme Corp") in everyone
    bob = triples(relations(db, acl="bob").json()["data"])
    assert bob == {("Microsoft", "acquired", "GitHub")}
    alice = triples(relations(db, acl=["bob", "alice"]).json()["data"])
    assert ("Ada Lovelace", "works_at", "Acme Corp") in alice
    assert triples(relations(db, acl="bob,team-x").json()["data"]) == everyone
    assert relations(db, id="secret", acl="bob").json()["data"]["relations"] == []
    # a metadata change moves the readers in the graph too
    r = db.client.patch(
        "/context/secret/metadata",
        json={"database": "acme", "collection": "", "additional_metadata": {"acl": ["bob"]}},
        headers=db.headers(),
    )
    assert r.status_code == 200, r.text
    assert ("Ada Lovelace", "works_at", "Acme Corp") in triples(relations(db, acl="bob").json()["data"])
    assert ("Ada Lovelace", "works_at", "Acme Corp") not in triples(relations(db, acl="alice").json()["data"])


def test_delete_item_and_collection_remove_their_share(db: LocalApp) -> None:
    ingest(
        db,
        [
            {"id": "a", "content": {"text": "Ada Lovelace joined Acme Corp in 2024."}},
            {"id": "b", "content": {"text": "Microsoft acquired GitHub in 2018. Ada Lovelace works at Acme Corp."}},
        ],
    )
    r = db.client.request("DELETE", "/context", json={"database": "acme", "ids": ["b"]}, headers=db.headers())
    assert r.status_code == 200
    data = relations(db).json()["data"]
    assert triples(data) == {("Ada Lovelace", "works_at", "Acme Corp")}
    assert {e["chunk_id"].split("#")[0] for g in data["relations"] for e in g["relations"]} == {"a"}
    rows = db.container.graph.query("default", "ctx:knowledge:acme:", "MATCH (e:Entity) RETURN e.name")  # type: ignore[union-attr]
    assert sorted(r[0] for r in rows.rows) == ["Acme Corp", "Ada Lovelace"], "orphan entities dropped"
    r = db.client.request(
        "DELETE", "/databases/collections", json={"database": "acme", "collection": ""}, headers=db.headers()
    )
    assert r.status_code == 200, r.text
    assert "ctx:knowledge:acme:" not in db.container.graph.list_graphs("default", "ctx:")  # type: ignore[union-attr]


def test_collections_are_isolated(db: LocalApp) -> None:
    ingest(db, [{"id": "a", "content": {"text": TEXT}}], collection="team1")
    assert relations(db, collection="team1").json()["data"]["relations"]
    assert relations(db, collection="team2").json()["data"]["relations"] == []
    assert relations(db).json()["data"]["relations"] == []


def test_other_organisation_sees_nothing(db: LocalApp, other_key: str) -> None:
    ingest(db, [{"id": "a", "content": {"text": TEXT}}])
    r = db.client.get("/context/relations", params={"database": "acme"}, headers=db.headers(other_key))
    assert r.status_code == 404


def test_cached_ranking_follows_every_write_even_another_process(db: LocalApp) -> None:
    # a collection-wide read ranks every group once and keeps the ranking until the graph's version
    # token changes: each write (ingest, delete, metadata) must show on the next read
    from ctxstore.services.registry import Services

    ingest(db, [{"id": "m", "content": {"text": "Microsoft acquired GitHub in 2018."}}])
    for acl in (None, "bob"):
        assert triples(relations(db, acl=acl).json()["data"]) == {("Microsoft", "acquired", "GitHub")}
    ingest(db, [{"id": "a", "content": {"text": "Ada Lovelace joined Acme Corp in 2024."}}])
    for acl in (None, "bob"):
        assert ("Ada Lovelace", "works_at", "Acme Corp") in triples(relations(db, acl=acl).json()["data"])
    r = db.client.request("DELETE", "/context", json={"database": "acme", "ids": ["m"]}, headers=db.headers())
    assert r.status_code == 200
    for acl in (None, "bob"):
        assert triples(relations(db, acl=acl).json()["data"]) == {("Ada Lovelace", "works_at", "Acme Corp")}
    # another process (its own service, its own cache) writes to the same graph
    graphs = db.services.graphs
    assert graphs is not None
    other = Services(db.container).graphs
    assert other is not None and other is not graphs
    other.entities.remove_item("default", "ctx:knowledge:acme:", "a")
    for acl in (None, "bob"):
        assert relations(db, acl=acl).json()["data"]["relations"] == []


def test_a_graph_without_version_token_is_read_uncached(db: LocalApp) -> None:
    # graphs written before version tokens existed are read uncached, with the same ranking and paging
    ingest(db, [{"id": "m", "content": {"text": "Microsoft acquired GitHub in 2018. Ada Lovelace joined Acme Corp."}}])
    cached = [relations(db, limit=1, cursor=c).json()["data"] for c in (0, 1)]
    db.container.graph.query("default", "ctx:knowledge:acme:", "MATCH (v:GraphVersion) DELETE v")  # type: ignore[union-attr]
    assert [relations(db, limit=1, cursor=c).json()["data"] for c in (0, 1)] == cached
    assert cached[0]["is_truncated"] is True and cached[1]["is_truncated"] is False


class _CountingSpacy(SpacyExtractor):
    def __init__(self) -> None:
        super().__init__()  # in-process, so the calls can be counted
        self.single = 0
        self.batches: list[int] = []

    def extract(self, text: str) -> Extraction:
        self.single += 1
        return super().extract(text)

    def extract_many(self, texts: list[str], batch_size: int = 64) -> list[Extraction]:
        self.batches.append(len(texts))
        return super().extract_many(texts, batch_size)


def test_the_graph_step_extracts_all_chunks_of_an_item_in_one_batch(db: LocalApp) -> None:
    counting = _CountingSpacy()
    db.container.extractor = counting
    # Three sections -> several chunks; each sentence names a relation the batch must still find.
    text = "\n\n".join(f"# Part {i}\n\n" + TEXT + " filler" * 300 for i in range(3))
    ingest(db, [{"id": "long", "title": "Long", "type": "note", "content": {"text": text}}])
    chunks = db.client.get("/context/chunks", params={"database": "acme", "id": "long"}, headers=db.headers())
    n_chunks = len(chunks.json()["data"]["chunks"])
    assert n_chunks >= 3
    assert counting.batches == [n_chunks] and counting.single == 0
    assert ("Ada Lovelace", "works_at", "Acme Corp") in triples(relations(db).json()["data"])
