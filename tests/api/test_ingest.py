"""POST /context/ingest: every request rule, the pipeline's states, and status lookups."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import pytest

from ctxstore.ports.search_index import SearchFilter
from tests.support.app import LocalApp


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, org: str, event_type: str, payload: dict[str, Any]) -> None:
        self.events.append({**payload, "org": org, "event": event_type})


@pytest.fixture
def db(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme")
    return local


def _ingest(la: LocalApp, *, files: list[tuple[str, bytes, str]] | None = None, **fields: Any) -> Any:
    data = {"database": "acme", **{k: (json.dumps(v) if not isinstance(v, str) else v) for k, v in fields.items()}}
    multipart = [("documents", f) for f in (files or [])]
    return la.client.post("/context/ingest", data=data, files=multipart or None, headers=la.headers())


def _status(la: LocalApp, *ids: str, collection: str = "") -> dict[str, dict[str, Any]]:
    r = la.client.get(
        "/context/status",
        params={"database": "acme", "collection": collection, "ids": ",".join(ids)},
        headers=la.headers(),
    )
    if r.status_code == 404:
        return {i: {"error_code": r.json()["error"]["code"]} for i in ids}
    return {s["id"]: s for s in r.json()["data"]["statuses"]}


def _texts(la: LocalApp, item_id: str, store: str = "knowledge", collection: str = "") -> list[str]:
    idx = la.container.search_index
    assert idx is not None
    hits = idx.keyword_search(
        "default",
        SearchFilter("acme", [collection], store, item_ids=[item_id]),  # type: ignore[arg-type]
        "the OR a OR is OR of OR and",
        limit=100,
    )
    chunks = idx.get_chunks("default", [h.chunk_id for h in hits])
    return [c.text for c in chunks]


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"\x00\xff\xff\xff" * 1
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


APP = [
    {
        "id": "app1",
        "title": "Quarterly plan",
        "type": "doc",
        "content": {"text": "The quarterly plan is to ship the search feature and improve the latency of the index."},
    }
]


def test_accepts_documents_and_app_items_and_completes(db: LocalApp) -> None:
    rec = Recorder()
    db.container.events = rec
    r = _ingest(
        db,
        files=[("guide.md", b"# Guide\n\nThe install guide explains the setup of the service.", "text/markdown")],
        document_metadata=[{"id": "doc1", "additional_metadata": {"author": "ada"}}],
        app_knowledge=APP,
    )
    assert r.status_code == 202
    data = r.json()["data"]
    assert data["success"] is True and data["success_count"] == 2 and data["failed_count"] == 0
    doc, app = data["results"]
    assert doc == {
        "id": "doc1",
        "filename": "guide.md",
        "title": "guide.md",
        "status": "queued",
        "error": None,
        "error_code": None,
        "infer": False,
        "relations_created": 0,
        "relations_error": "",
    }
    assert app["id"] == "app1" and app["title"] == "Quarterly plan"
    assert _status(db, "doc1")["doc1"]["indexing_status"] == "queued"
    db.drain()
    st = _status(db, "doc1", "app1")
    assert st["doc1"]["indexing_status"] == st["app1"]["indexing_status"] == "completed"
    assert any("install guide" in t for t in _texts(db, "doc1"))
    seen = [(e["id"], e["indexing_status"]) for e in rec.events if e["id"] == "doc1"]
    assert seen == [("doc1", "queued"), ("doc1", "processing"), ("doc1", "graph_creation"), ("doc1", "completed")]
    assert all(e["event"] == "indexing.status_changed" and e["type"] == "knowledge" for e in rec.events)


def test_legacy_scope_names_in_the_form(db: LocalApp) -> None:
    r = db.client.post(
        "/context/ingest",
        data={"tenant_id": "acme", "sub_tenant_id": "team", "app_knowledge": json.dumps(APP)},
        headers=db.headers(),
    )
    assert r.status_code == 202 and r.headers["deprecation"] == "true"
    assert r.json()["meta"]["collection"] == "team"
    db.drain()
    assert _status(db, "app1", collection="team")["app1"]["indexing_status"] == "completed"
    assert _status(db, "app1")["app1"]["error_code"] == "FILE_NOT_FOUND"  # other collection
    cols = db.client.get("/databases/collections", params={"database": "acme"}, headers=db.headers())
    assert cols.json()["data"]["collections"] == ["team"]


@pytest.mark.parametrize("key", ["title", "type", "url", "timestamp"])
def test_document_metadata_keys_are_closed(db: LocalApp, key: str) -> None:
    r = _ingest(db, files=[("a.txt", b"hello", "text/plain")], document_metadata=[{key: "x"}])
    assert r.status_code == 400 and f"'{key}'" in r.json()["error"]["message"]


def test_document_metadata_length_mismatch_is_validation_error(db: LocalApp) -> None:
    r = _ingest(
        db, files=[("a.txt", b"a", "text/plain"), ("b.txt", b"b", "text/plain")], document_metadata=[{"id": "only_one"}]
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_ERROR"


def test_metadata_checked_against_schema(local: LocalApp) -> None:
    local.create_ready_database(
        "acme",
        database_metadata_schema=[{"name": "region", "data_type": "VARCHAR"}, {"name": "year", "data_type": "INT32"}],
    )
    ok = _ingest(local, app_knowledge=[dict(APP[0], metadata={"region": "eu", "year": 2024})])
    assert ok.status_code == 202
    r = _ingest(local, app_knowledge=[dict(APP[0], id="x2", metadata={"colour": "red"})])
    assert r.status_code == 400 and "colour" in r.json()["error"]["message"]
    r = _ingest(local, app_knowledge=[dict(APP[0], id="x3", metadata={"year": "2024"})])
    assert r.status_code == 422 and "year" in r.json()["error"]["message"]
    r = _ingest(local, files=[("a.txt", b"x", "text/plain")], document_metadata=[{"metadata": {"nope": 1}}])
    assert r.status_code == 400 and "nope" in r.json()["error"]["message"]


def test_ids_with_commas_are_rejected_in_every_list(db: LocalApp) -> None:
    cases = [
        {"files": [("a.txt", b"x", "text/plain")], "document_metadata": [{"id": "a,b"}]},
        {"app_knowledge": [dict(APP[0], id="a,b")]},
    ]
    for case in cases:
        r = _ingest(db, **case)
        assert r.status_code == 400 and "comma" in r.json()["error"]["message"]
    r = _ingest(db, type="memory", memories=[{"id": "m,1", "text": "hi"}])
    assert r.status_code == 400 and "comma" in r.json()["error"]["message"]


def test_graph_payload_rules(db: LocalApp) -> None:
    ents = {
        "a": {"name": "Ada", "type": "PERSON", "namespace": "people"},
        "b": {"name": "Babbage", "type": "PERSON", "namespace": "people"},
    }
    good = {
        "app1": {
            "entities": ents,
            "relations": [
                {
                    "source": "a",
                    "target": "b",
                    "predicate": "worked_with",
                    "context": "Ada worked with Babbage",
                    "temporal_details": None,
                }
            ],
        }
    }
    r = _ingest(db, app_knowledge=APP, graph_payload=good)
    assert r.status_code == 202 and r.json()["data"]["results"][0]["relations_created"] == 1
    r = _ingest(db, app_knowledge=APP, graph_payload={"nope": {"entities": {}, "relations": []}})
    assert r.status_code == 400 and "nope" in r.json()["error"]["message"]
    bad_end = {"app1": {"entities": ents, "relations": [{"source": "a", "target": "zz", "predicate": "p"}]}}
    r = _ingest(db, app_knowledge=APP, graph_payload=bad_end)
    assert r.status_code == 400 and "zz" in r.json()["error"]["message"]
    many = {
        "app1": {
            "entities": {f"e{i}": {"name": f"E{i}", "type": "T", "namespace": ""} for i in range(5001)},
            "relations": [],
        }
    }
    r = _ingest(db, app_knowledge=APP, graph_payload=many)
    assert r.status_code == 400 and "5000" in r.json()["error"]["message"]
    hub = {f"e{i}": {"name": f"E{i}", "type": "T", "namespace": ""} for i in range(502)}
    star = {
        "app1": {
            "entities": hub,
            "relations": [{"source": "e0", "target": f"e{i}", "predicate": "p"} for i in range(1, 502)],
        }
    }
    r = _ingest(db, app_knowledge=APP, graph_payload=star)
    assert r.status_code == 400 and "500" in r.json()["error"]["message"]
    r = _ingest(db, app_knowledge=APP, graph_payload="[1]")
    assert r.status_code == 400


def test_format_by_extension_then_content_type(db: LocalApp) -> None:
    r = _ingest(
        db,
        files=[
            ("README", b"# Plain\n\nText without an extension.", "text/plain"),
            ("photo.heic", b"\x00\x00\x00\x18ftypheic", "image/heic"),
            ("page.html", b"<html></html>", "text/html"),
            ("archive.zip", b"PK\x03\x04", "application/zip"),
            ("mystery.xyz", b"??", "application/octet-stream"),
            ("notes.txt", b"fine text", "text/html"),
        ],
    )
    assert r.status_code == 202
    data = r.json()["data"]
    by_name = {x["filename"]: x for x in data["results"]}
    assert by_name["README"]["status"] == "queued"
    assert by_name["notes.txt"]["status"] == "queued"  # the extension wins over the content type
    for name in ("photo.heic", "page.html", "archive.zip", "mystery.xyz"):
        assert by_name[name]["status"] == "failed" and by_name[name]["error_code"] == "E1002", name
        assert name in by_name[name]["error"]
    assert data["success"] is False and data["success_count"] == 2 and data["failed_count"] == 4
    assert r.json()["success"] is True  # the request itself was accepted
    rejected = by_name["photo.heic"]["id"]
    assert _status(db, rejected)[rejected]["error_code"] == "FILE_NOT_FOUND"
    db.drain()
    assert _status(db, by_name["README"]["id"])[by_name["README"]["id"]]["indexing_status"] == "completed"


def test_file_over_50mb_rejects_whole_request(db: LocalApp) -> None:
    big = b"a" * (50 * 1024 * 1024 + 1)
    r = _ingest(
        db,
        files=[("small.txt", b"small", "text/plain"), ("huge.txt", big, "text/plain")],
        document_metadata=[{"id": "s1"}, {"id": "h1"}],
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert "huge.txt" in r.json()["error"]["message"]
    assert _status(db, "s1", "h1")["s1"]["error_code"] == "FILE_NOT_FOUND"
    assert db.container.queue.pending("ingest") == 0


def test_upsert_replaces_and_false_conflicts(db: LocalApp) -> None:
    _ingest(db, app_knowledge=APP)
    db.drain()
    assert any("quarterly plan" in t.lower() for t in _texts(db, "app1"))
    new = [dict(APP[0], content={"text": "A completely different body of the note about gardening and the soil."})]
    r = _ingest(db, app_knowledge=new)
    assert r.status_code == 202
    db.drain()
    texts = _texts(db, "app1")
    assert texts and all("search feature" not in t for t in texts) and any("gardening" in t for t in texts)
    r = _ingest(db, app_knowledge=new, upsert="false")
    assert r.status_code == 409 and "app1" in r.json()["error"]["message"]
    r = _ingest(db, app_knowledge=[dict(APP[0], id="fresh")], upsert="false")
    assert r.status_code == 202
    r = _ingest(db, app_knowledge=APP, upsert="maybe")
    assert r.status_code == 400 and "upsert" in r.json()["error"]["message"]


def test_duplicate_ids_in_one_request(db: LocalApp) -> None:
    r = _ingest(db, app_knowledge=[APP[0], APP[0]])
    assert r.status_code == 400 and "more than once" in r.json()["error"]["message"]


def test_request_shape_errors(db: LocalApp) -> None:
    assert _ingest(db).status_code == 400  # knowledge with nothing
    r = _ingest(db, app_knowledge="{not json")
    assert r.status_code == 400 and "app_knowledge" in r.json()["error"]["message"]
    r = _ingest(db, app_knowledge={"id": "x"})
    assert r.status_code == 400 and "array" in r.json()["error"]["message"]
    r = _ingest(db, app_knowledge=[{"id": "x", "content": "plain"}], type="knowledges")
    assert r.status_code == 400 and "type" in r.json()["error"]["message"]
    r = _ingest(db, app_knowledge=[{"id": "x", "content": {"html": "<p/>"}}])
    assert r.status_code == 400 and "content" in r.json()["error"]["message"]
    r = db.client.post("/context/ingest", json={"database": "acme"}, headers=db.headers())
    assert r.status_code == 400 and "multipart" in r.json()["error"]["message"]
    r = db.client.post("/context/ingest", data={"app_knowledge": json.dumps(APP)}, headers=db.headers())
    assert r.status_code == 400 and "database" in r.json()["error"]["message"]
    r = db.client.post(
        "/context/ingest", data={"database": "nope", "app_knowledge": json.dumps(APP)}, headers=db.headers()
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "DATABASE_NOT_FOUND"
    r = _ingest(db, app_knowledge=APP, surprise="1")
    assert r.status_code == 400 and "surprise" in r.json()["error"]["message"]


def test_memories_rules_and_completion(db: LocalApp) -> None:
    r = _ingest(db, type="memory")
    assert r.status_code == 400 and "memories" in r.json()["error"]["message"]
    r = _ingest(db, type="memory", memories=[{"title": "no content"}])
    assert r.status_code == 400 and "text" in r.json()["error"]["message"]
    r = _ingest(db, type="memory", memories=[{"text": "x"}], files=[("a.txt", b"x", "text/plain")])
    assert r.status_code == 400
    r = _ingest(db, memories=[{"text": "x"}])  # memories need type=memory
    assert r.status_code == 400
    r = _ingest(
        db,
        type="memory",
        memories=[
            {
                "id": "m1",
                "text": "I moved to Lisbon last spring and work as a data engineer.",
                "infer": True,
                "user_name": "Sam",
                "title": "note",
            },
            {
                "id": "m2",
                "user_assistant_pairs": [
                    {"user": "What should I cook tonight?", "assistant": "Try a mushroom risotto."}
                ],
            },
        ],
    )
    assert r.status_code == 202
    results = r.json()["data"]["results"]
    assert [x["infer"] for x in results] == [True, False]
    db.drain()
    st = _status(db, "m1", "m2")
    assert st["m1"]["indexing_status"] == st["m2"]["indexing_status"] == "completed"
    assert st["m1"]["type"] == "memory"
    assert any("Lisbon" in t for t in _texts(db, "m1", store="memory"))
    assert any("risotto" in t for t in _texts(db, "m2", store="memory"))
    assert _texts(db, "m1") == []  # never in the knowledge store


def test_renamed_file_ends_errored_with_a_code(db: LocalApp) -> None:
    r = _ingest(
        db,
        files=[
            ("report.docx", _png(), "application/octet-stream"),
            ("data.pdf", b"%PDF-garbage" + bytes(range(256)), "application/pdf"),
        ],
        document_metadata=[{"id": "fake_docx"}, {"id": "fake_pdf"}],
    )
    assert r.status_code == 202 and r.json()["data"]["success"] is True  # passes the upload check
    db.drain()
    st = _status(db, "fake_docx", "fake_pdf")
    for item in ("fake_docx", "fake_pdf"):
        assert st[item]["indexing_status"] == "errored" and st[item]["error_code"], st[item]
        assert st[item]["success"] is False


def test_status_lookup_forms(db: LocalApp) -> None:
    _ingest(db, app_knowledge=[APP[0], dict(APP[0], id="app2")])
    h = db.headers()
    r = db.client.get("/context/status", params=[("database", "acme"), ("ids", "app1"), ("ids", "app2")], headers=h)
    assert [s["id"] for s in r.json()["data"]["statuses"]] == ["app1", "app2"]
    r = db.client.get("/context/status", params={"database": "acme", "id": "app1"}, headers=h)
    assert r.json()["data"]["statuses"][0]["indexing_status"] == "queued"
    r = db.client.get("/context/status", params={"database": "acme"}, headers=h)
    assert r.status_code == 400
    r = db.client.get("/context/status", params={"database": "acme", "ids": "ghost"}, headers=h)
    assert r.status_code == 404 and r.json()["error"]["code"] == "FILE_NOT_FOUND"


def test_an_item_is_searchable_before_its_graph_step_runs(db: LocalApp) -> None:
    """The index job ends at graph_creation and queues the graph job; the item answers queries meanwhile."""
    from ctxstore.pipeline.jobs import GRAPH_QUEUE
    from ctxstore.pipeline.local_runner import LocalRunner

    items = [{"id": "n1", "title": "Lighthouse", "type": "note", "content": {"text": "The keeper logs storms."}}]
    assert _ingest(db, app_knowledge=items).status_code == 202
    foreground = [s for s in db.runner._specs if not s.background]
    LocalRunner(db.container.queue, foreground).drain()  # every job but the graph step's
    assert _status(db, "n1")["n1"]["indexing_status"] == "graph_creation"
    assert db.container.queue.pending(GRAPH_QUEUE) == 1
    r = db.client.post(
        "/query", json={"database": "acme", "query": "keeper storms", "mode": "fast"}, headers=db.headers()
    )
    assert [c["id"] for c in r.json()["data"]["chunks"]] == ["n1"]
    db.drain()
    assert _status(db, "n1")["n1"]["indexing_status"] == "completed"
    assert db.container.queue.pending(GRAPH_QUEUE) == 0


def test_an_app_item_gets_its_title_as_a_heading_once(db: LocalApp) -> None:
    """The title is put before an app item's text as a heading, unless the text opens with it already (a
    connector page that starts with its own heading): a second copy diluted short pages' embeddings."""
    items = [
        {
            "id": "t1",
            "title": "Release Process",
            "type": "page",
            "content": {"text": "# Release Process\n\nThe review is on Tuesdays."},
        },
        {"id": "t2", "title": "Release Process", "type": "page", "content": {"text": "The deploys happen then."}},
    ]
    assert _ingest(db, app_knowledge=items).status_code == 202
    db.drain()
    [own] = _texts(db, "t1")
    [added] = _texts(db, "t2")
    assert own.count("Release Process") == 1 and own.startswith("# Release Process")
    assert added.startswith("# Release Process\n\nThe deploys happen then.")
