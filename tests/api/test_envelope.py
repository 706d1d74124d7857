"""The envelope and error mapping on every core route."""

from __future__ import annotations

import uuid
from pathlib import Path

from fastapi import APIRouter

from tests.support.app import LocalApp, make_app


def _assert_meta(body: dict, response_headers: dict) -> None:
    meta = body["meta"]
    assert uuid.UUID(meta["request_id"]).version == 4
    assert response_headers["x-request-id"] == meta["request_id"]
    assert isinstance(meta["latency_ms"], int | float) and meta["latency_ms"] >= 0
    assert meta["api_version"].startswith("2.0.")
    assert response_headers["x-api-version"] == meta["api_version"]


def test_success_envelope(local: LocalApp) -> None:
    r = local.client.post("/databases", json={"database": "acme"}, headers=local.headers())
    body = r.json()
    assert r.status_code == 202
    assert body["success"] is True and body["error"] is None and body["data"]["database"] == "acme"
    assert body["meta"]["database"] == "acme"
    assert body["meta"]["tenant_id"] == "acme"  # deprecated echo of the scope
    _assert_meta(body, dict(r.headers))
    assert "deprecation" not in body["meta"]
    assert "deprecation" not in r.headers and "warning" not in r.headers


def test_failure_envelope(local: LocalApp) -> None:
    r = local.client.get("/databases/status", params={"database": "missing"}, headers=local.headers())
    body = r.json()
    assert r.status_code == 404
    assert body["success"] is False and body["data"] is None
    assert body["error"] == {"code": "DATABASE_NOT_FOUND", "message": "Database 'missing' not found"}
    _assert_meta(body, dict(r.headers))


def test_request_ids_are_unique(local: LocalApp) -> None:
    ids = {local.client.get("/databases", headers=local.headers()).json()["meta"]["request_id"] for _ in range(5)}
    assert len(ids) == 5


def test_unknown_route_and_method_answer_in_envelope(local: LocalApp) -> None:
    r = local.client.get("/no/such/route", headers=local.headers())
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    _assert_meta(r.json(), dict(r.headers))
    r = local.client.put("/databases", json={}, headers=local.headers())
    assert r.status_code == 405 and r.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    assert r.json()["success"] is False


def test_missing_parameter_is_400_naming_it(local: LocalApp) -> None:
    r = local.client.get("/databases/status", headers=local.headers())
    assert r.status_code == 400
    assert r.json()["error"] == {"code": "INVALID_PARAMETERS", "message": "'database' is required"}
    r = local.client.post("/databases", json={}, headers=local.headers())
    assert r.status_code == 400 and "'database'" in r.json()["error"]["message"]


def test_malformed_json_is_400(local: LocalApp) -> None:
    r = local.client.post(
        "/databases", content=b'{"database": ', headers=local.headers(**{"Content-Type": "application/json"})
    )
    assert r.status_code == 400
    body = r.json()
    assert body["error"]["code"] == "INVALID_PARAMETERS" and "malformed" in body["error"]["message"]
    assert "detail" not in body or isinstance(body["detail"], dict)  # never FastAPI's default list


def test_wrong_type_is_400(local: LocalApp) -> None:
    r = local.client.post("/databases", json={"database": ["a"]}, headers=local.headers())
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_PARAMETERS"
    assert "database" in r.json()["error"]["message"]


def test_semantic_validation_is_422(local: LocalApp) -> None:
    r = local.client.post(
        "/databases",
        json={"database": "acme", "database_metadata_schema": [{"name": "region", "data_type": "BLOB"}]},
        headers=local.headers(),
    )
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "VALIDATION_ERROR"
    assert "data_type" in r.json()["error"]["message"]
    # nothing was stored
    assert local.client.get("/databases", headers=local.headers()).json()["data"]["databases"] == []


def test_unsupported_api_version_is_400(local: LocalApp) -> None:
    r = local.client.get("/databases", headers=local.headers(**{"API-Version": "1"}))
    assert r.status_code == 400 and "API-Version" in r.json()["error"]["message"]
    assert local.client.get("/databases", headers={"Authorization": f"Bearer {local.key}"}).status_code == 200


def test_unexpected_exception_is_500_without_internals(tmp_path: Path) -> None:
    boom = APIRouter()

    @boom.get("/boom")
    def explode() -> None:
        raise RuntimeError("secret internal detail /etc/shadow")

    la = make_app(tmp_path / "d", extra_routers=[boom])
    try:
        r = la.client.get("/boom", headers=la.headers())
        body = r.json()
        assert r.status_code == 500
        assert body["success"] is False and body["error"]["code"] == "INTERNAL_ERROR"
        assert "secret" not in r.text and "Traceback" not in r.text
        assert body["meta"]["request_id"] in body["error"]["message"]
        assert r.headers["x-request-id"] == body["meta"]["request_id"]
    finally:
        la.close()


def test_health_openapi_docs_need_no_key(local: LocalApp) -> None:
    assert local.client.get("/health").json()["status"] == "ok"
    spec = local.client.get("/openapi.json").json()
    assert "/databases" in spec["paths"] and "/databases/{database}/metadata-schema" in spec["paths"]
    assert local.client.get("/docs").status_code == 200
