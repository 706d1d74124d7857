"""Items after ingest: list, inspect (content and signed URL), chunks, delete, metadata update."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.app import LocalApp

APPS = [
    {
        "id": f"note{i}",
        "title": f"Note {i}",
        "type": "note",
        "content": {"text": f"Body of note {i} about topic {i % 2}."},
        "metadata": {"team": "red" if i % 2 else "blue"},
        "additional_metadata": {"author": f"u{i}", "tags": ["x", f"t{i}"]},
    }
    for i in range(5)
]


@pytest.fixture
def filled(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme", database_metadata_schema=[{"name": "team", "data_type": "VARCHAR"}])
    r = local.client.post(
        "/context/ingest",
        headers=local.headers(),
        data={"database": "acme", "app_knowledge": json.dumps(APPS)},
        files=[("documents", ("report.txt", b"The annual report. Revenue grew by ten percent.", "text/plain"))],
    )
    assert r.status_code == 202
    local.client.post(
        "/context/ingest",
        headers=local.headers(),
        data={
            "database": "acme",
            "type": "memory",
            "memories": json.dumps(
                [{"id": "mem1", "text": "I prefer window seats on long flights.", "infer": True, "user_name": "Kim"}]
            ),
        },
    )
    local.drain()
    return local


def _list(la: LocalApp, **body: Any) -> Any:
    return la.client.post("/context/list", json={"database": "acme", **body}, headers=la.headers())


def test_list_pages_and_fields(filled: LocalApp) -> None:
    r = _list(filled, page=1, page_size=4)
    data = r.json()["data"]
    assert r.status_code == 200 and data["total"] == 6 and len(data["sources"]) == 4
    assert data["pagination"] == {
        "page": 1,
        "page_size": 4,
        "total": 6,
        "total_pages": 2,
        "has_next": True,
        "has_previous": False,
    }
    page2 = _list(filled, page=2, page_size=4).json()["data"]
    ids = {s["id"] for s in data["sources"]} | {s["id"] for s in page2["sources"]}
    assert len(ids) == 6 and page2["pagination"]["has_next"] is False
    one = next(s for s in data["sources"] + page2["sources"] if s["id"] == "note1")
    assert one["title"] == "Note 1" and one["indexing_status"] == "completed" and one["metadata"] == {"team": "red"}
    doc = next(s for s in data["sources"] + page2["sources"] if s["type"] == "file")
    assert doc["title"] == "report.txt" and doc["filename"] == "report.txt"


def test_list_filters_ids_projection_and_memories(filled: LocalApp) -> None:
    red = _list(filled, filters={"metadata": {"team": "red"}}).json()["data"]
    assert sorted(s["id"] for s in red["sources"]) == ["note1", "note3"]
    by_author = _list(filled, filters={"additional_metadata": {"author": "u2"}}).json()["data"]
    assert [s["id"] for s in by_author["sources"]] == ["note2"]
    by_tag = _list(filled, filters={"additional_metadata": {"tags": "t4"}}).json()["data"]
    assert [s["id"] for s in by_tag["sources"]] == ["note4"]
    assert [s["id"] for s in _list(filled, ids=["note0", "ghost"]).json()["data"]["sources"]] == ["note0"]
    proj = _list(filled, ids=["note0"], include_fields=["title"]).json()["data"]["sources"][0]
    assert set(proj) == {"id", "database", "collection", "tenant_id", "sub_tenant_id", "title"}
    mem = _list(filled, type="memory").json()["data"]
    assert [s["id"] for s in mem["sources"]] == ["mem1"] and mem["sources"][0]["user_name"] == "Kim"
    assert _list(filled, page_size=0).status_code == 400
    assert _list(filled, type="files").status_code == 400


def test_inspect_content_and_signed_url(filled: LocalApp) -> None:
    report = next(s for s in _list(filled).json()["data"]["sources"] if s["type"] == "file")
    r = filled.client.get("/context/inspect", params={"database": "acme", "id": report["id"]}, headers=filled.headers())
    data = r.json()["data"]
    assert r.status_code == 200 and "Revenue grew" in data["content"]
    assert data["content_type"] == "text/plain" and data["size_bytes"] == len(
        b"The annual report. Revenue grew by ten percent."
    )
    url = data["presigned_url"]
    path = httpx.URL(url).raw_path.decode()
    dl = filled.client.get(path)  # no API key: the signed token is the credential
    assert dl.status_code == 200 and dl.content.startswith(b"The annual report")
    assert "report.txt" in dl.headers["content-disposition"]
    tampered = path[:-3] + ("AAA" if not path.endswith("AAA") else "BBB")
    assert filled.client.get(tampered).status_code == 403
    content_only = filled.client.get(
        "/context/inspect", params={"database": "acme", "id": "note1", "mode": "content"}, headers=filled.headers()
    ).json()["data"]
    assert "Body of note 1" in content_only["content"] and "presigned_url" not in content_only
    r = filled.client.get("/context/inspect", params={"database": "acme", "id": "ghost"}, headers=filled.headers())
    assert r.status_code == 404 and r.json()["error"]["code"] == "SOURCE_NOT_FOUND"
    mem = filled.client.get(
        "/context/inspect", params={"database": "acme", "id": "mem1"}, headers=filled.headers()
    ).json()["data"]
    assert "window seats" in mem["content"] and "Kim prefers window seats" in mem["inferred_content"]


def test_expired_signed_url_is_refused(filled: LocalApp) -> None:
    data = filled.client.get(
        "/context/inspect",
        params={"database": "acme", "id": "note0", "mode": "url", "expiry_seconds": 1},
        headers=filled.headers(),
    ).json()["data"]
    path = httpx.URL(data["presigned_url"]).raw_path.decode()
    real_now = filled.container.clock.now
    filled.container.clock.now = lambda: real_now() + 10  # type: ignore[method-assign]
    assert filled.client.get(path).status_code == 403


def test_chunks(filled: LocalApp) -> None:
    r = filled.client.get("/context/chunks", params={"database": "acme", "id": "note2"}, headers=filled.headers())
    data = r.json()["data"]
    assert r.status_code == 200 and data["total"] == 1 and "Body of note 2" in data["chunks"][0]["text"]
    assert data["chunks"][0]["metadata"] == {"team": "blue"}
    mem = filled.client.get(
        "/context/chunks", params={"database": "acme", "id": "mem1", "type": "memory"}, headers=filled.headers()
    ).json()["data"]
    assert any(c["text"].startswith("Inferred from conversation") for c in mem["chunks"])
    r = filled.client.get(
        "/context/chunks", params={"database": "acme", "id": "mem1", "type": "knowledge"}, headers=filled.headers()
    )
    assert r.status_code == 404


def test_delete_removes_every_trace(filled: LocalApp) -> None:
    report = next(s for s in _list(filled).json()["data"]["sources"] if s["type"] == "file")
    files_before = sum(1 for p in (filled.data_dir / "blobs").rglob("*") if p.is_file())
    r = filled.client.request(
        "DELETE", "/context", json={"database": "acme", "ids": [report["id"], "ghost"]}, headers=filled.headers()
    )
    data = r.json()["data"]
    assert r.status_code == 200 and data["deleted_count"] == 1
    assert data["results"] == [
        {"id": report["id"], "deleted": True, "error": ""},
        {"id": "ghost", "deleted": False, "error": "not found"},
    ]
    st = filled.client.get(
        "/context/status", params={"database": "acme", "ids": report["id"]}, headers=filled.headers()
    )
    assert st.status_code == 404
    idx = filled.container.search_index
    assert idx is not None and idx.item_chunks("default", "acme", "", "knowledge", report["id"]) == []
    assert sum(1 for p in (filled.data_dir / "blobs").rglob("*") if p.is_file()) == files_before - 1
    assert _list(filled).json()["data"]["total"] == 5
    r = filled.client.request(
        "DELETE", "/context", json={"database": "acme", "type": "memory", "ids": ["mem1"]}, headers=filled.headers()
    )
    assert r.json()["data"]["user_memory_deleted"] == 1


def test_metadata_update_merges_and_syncs_chunks(filled: LocalApp) -> None:
    h = filled.headers()
    r = filled.client.patch(
        "/context/note1/metadata",
        json={
            "database": "acme",
            "collection": "",
            "database_metadata": {"team": "green"},
            "additional_metadata": {"reviewed": True},
        },
        headers=h,
    )
    data = r.json()["data"]
    assert r.status_code == 200 and data["updated"] is True and data["vector_rows_synced"] == 1
    src = _list(filled, ids=["note1"]).json()["data"]["sources"][0]
    assert src["metadata"] == {"team": "green"}
    assert src["additional_metadata"]["reviewed"] is True and src["additional_metadata"]["author"] == "u1"
    chunk = filled.client.get("/context/chunks", params={"database": "acme", "id": "note1"}, headers=h).json()["data"]
    assert chunk["chunks"][0]["metadata"] == {"team": "green"}
    assert (
        filled.client.patch(
            "/context/note1/metadata",
            json={"database": "acme", "collection": "", "document_metadata": {"a": 1}},
            headers=h,
        ).status_code
        == 400
    )
    assert (
        filled.client.patch(
            "/context/note1/metadata", json={"database": "acme", "additional_metadata": {"a": 1}}, headers=h
        ).status_code
        == 400
    )  # collection required
    r = filled.client.patch(
        "/context/note1/metadata",
        json={"database": "acme", "collection": "", "database_metadata": {"undeclared": 1}},
        headers=h,
    )
    assert r.status_code == 400 and "undeclared" in r.json()["error"]["message"]
    r = filled.client.patch(
        "/context/ghost/metadata",
        json={"database": "acme", "collection": "", "additional_metadata": {"a": 1}},
        headers=h,
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "SOURCE_NOT_FOUND"
    # a title cannot change through this route
    filled.client.patch(
        "/context/note1/metadata",
        json={"database": "acme", "collection": "", "additional_metadata": {"title": "New"}},
        headers=h,
    )
    assert _list(filled, ids=["note1"]).json()["data"]["sources"][0]["title"] == "Note 1"
