"""POST /context/uploads (an extension to the spec) and ingest by reference, end to end on the local backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxstore.domain.ingest_request import MAX_FILE_BYTES
from ctxstore.services.items.uploads import staged_key
from tests.support.app import LocalApp

DOC = b"# Harbour log\n\nThe tugboat Marlin towed the barge past the lighthouse at dawn.\n"


@pytest.fixture
def db(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme")
    return local


def _session(la: LocalApp, key: str | None = None, **body: Any) -> Any:
    return la.client.post("/context/uploads", json={"filename": "log.md", **body}, headers=la.headers(key))


def _send(la: LocalApp, grant: dict[str, Any], data: bytes, name: str = "log.md") -> Any:
    # Exactly what a client does with an S3 presigned POST: the fields, then the file part.
    return la.client.post(grant["url"], data=grant["fields"], files={grant["file_field"]: (name, data)})


def _ingest(la: LocalApp, refs: list[dict[str, Any]], key: str | None = None, **fields: Any) -> Any:
    data = {"database": "acme", "uploads": json.dumps(refs), **fields}
    return la.client.post("/context/ingest", data=data, headers=la.headers(key))


def test_upload_then_ingest_by_reference_is_searchable_and_the_staged_copy_is_released(db: LocalApp) -> None:
    r = _session(db, size_bytes=len(DOC), content_type="text/markdown")
    assert r.status_code == 201, r.text
    grant = r.json()["data"]
    assert grant["method"] == "POST" and grant["max_bytes"] == MAX_FILE_BYTES and grant["url"].startswith("/blobs/")
    up = _send(db, grant, DOC)
    assert up.status_code == 204, up.text
    r = _ingest(db, [{"upload_id": grant["upload_id"]}], document_metadata=json.dumps([{"id": "log1"}]))
    assert r.status_code == 202, r.text
    results = r.json()["data"]["results"]
    assert [(x["id"], x["filename"], x["status"]) for x in results] == [("log1", "log.md", "queued")]
    db.drain()
    st = db.client.get("/context/status", params={"database": "acme", "ids": "log1"}, headers=db.headers())
    assert st.json()["data"]["statuses"][0]["indexing_status"] == "completed"
    chunks = db.client.get("/context/chunks", params={"database": "acme", "id": "log1"}, headers=db.headers())
    assert "tugboat Marlin" in json.dumps(chunks.json())
    # the staged object and its session are gone: the same id cannot be ingested twice
    assert not db.container.blobs.exists("default", staged_key(grant["upload_id"]))
    again = _ingest(db, [{"upload_id": grant["upload_id"]}])
    assert again.status_code == 404 and again.json()["error"]["code"] == "NOT_FOUND"


def test_refs_follow_file_parts_and_share_document_metadata_and_format_rules(db: LocalApp) -> None:
    grants = [_session(db, filename=n).json()["data"] for n in ("a.md", "b.exe")]
    for g, n in zip(grants, ("a.md", "b.exe"), strict=True):
        assert _send(db, g, DOC, n).status_code == 204
    refs = [{"upload_id": grants[0]["upload_id"]}, {"upload_id": grants[1]["upload_id"], "filename": "renamed.exe"}]
    meta = [{"id": "part"}, {"id": "ref-a"}, {"id": "ref-b"}]
    r = db.client.post(
        "/context/ingest",
        data={"database": "acme", "uploads": json.dumps(refs), "document_metadata": json.dumps(meta)},
        files=[("documents", ("p.md", DOC, "text/markdown"))],
        headers=db.headers(),
    )
    assert r.status_code == 202, r.text
    res = r.json()["data"]["results"]
    assert [(x["id"], x["filename"], x["status"]) for x in res] == [
        ("part", "p.md", "queued"),
        ("ref-a", "a.md", "queued"),
        ("ref-b", "renamed.exe", "failed"),
    ]
    assert res[2]["error_code"] == "E1002"


def test_upload_refuses_files_over_the_grant_and_empty_files(db: LocalApp) -> None:
    assert _session(db, size_bytes=MAX_FILE_BYTES + 1).status_code == 413
    grant = _session(db).json()["data"]
    too_big = _send(db, grant, b"x" * (MAX_FILE_BYTES + 1))
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert _send(db, grant, b"").status_code == 400
    # nothing was stored, so ingesting the reference says so
    r = _ingest(db, [{"upload_id": grant["upload_id"]}])
    assert r.status_code == 400 and "not been received" in r.json()["error"]["message"]


def test_upload_tokens_and_download_tokens_are_not_interchangeable(db: LocalApp) -> None:
    grant = _session(db).json()["data"]
    token = grant["url"].removeprefix("/blobs/")
    assert db.client.get(f"/blobs/{token}").status_code == 403  # an upload grant downloads nothing
    download = db.container.blobs.presigned_url("default", "acme/x", expires_in=60, filename="x", content_type="t")
    assert db.client.post(download, files={"file": ("x", b"evil")}).status_code == 403
    forged = grant["url"][:-3] + ("AAA" if not grant["url"].endswith("AAA") else "BBB")
    assert db.client.post(forged, files={"file": ("x", b"evil")}).status_code == 403


def test_another_organisations_upload_id_is_unknown(db: LocalApp, other_key: str) -> None:
    grant = _session(db).json()["data"]
    assert _send(db, grant, DOC).status_code == 204
    db.client.post("/databases", json={"name": "acme"}, headers=db.headers(other_key))
    db.drain()
    r = _ingest(db, [{"upload_id": grant["upload_id"]}], key=other_key)
    assert r.status_code == 404
    assert db.container.blobs.exists("default", staged_key(grant["upload_id"]))  # still the owner's


def test_ingest_refusal_keeps_the_staged_file_for_a_retry(db: LocalApp) -> None:
    grant = _session(db).json()["data"]
    assert _send(db, grant, DOC).status_code == 204
    bad = _ingest(db, [{"upload_id": grant["upload_id"]}], document_metadata=json.dumps([{"id": "a"}, {"id": "b"}]))
    assert bad.status_code == 422
    assert _ingest(db, [{"upload_id": grant["upload_id"]}]).status_code == 202


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"filename": ""}, 400),
        ({"filename": "a.md", "size_bytes": 0}, 400),
        ({"filename": "a.md", "size_bytes": True}, 400),
        ({"filename": "a.md", "nope": 1}, 400),
    ],
)
def test_upload_session_validation(db: LocalApp, body: dict[str, Any], code: int) -> None:
    r = db.client.post("/context/uploads", json=body, headers=db.headers())
    assert r.status_code == code and r.json()["error"]["code"] == "INVALID_PARAMETERS"


@pytest.mark.parametrize(
    "uploads",
    ["{}", "not json", json.dumps(["x"]), json.dumps([{"upload_id": ""}]), json.dumps([{"upload_id": "a", "x": 1}])],
)
def test_bad_upload_references(db: LocalApp, uploads: str) -> None:
    r = db.client.post("/context/ingest", data={"database": "acme", "uploads": uploads}, headers=db.headers())
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_PARAMETERS"
