"""Canonical scope names, legacy aliases, conflicts and deprecation signals."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from ctxstore.http.forms import scoped_form
from tests.support.app import LocalApp, make_app


def _dep_fields(body: dict) -> list[str | None]:
    return [d.get("deprecated_field") for d in body["meta"].get("deprecation", [])]


def test_query_alias_accepted_with_deprecation(local: LocalApp) -> None:
    local.create_ready_database("acme")
    r = local.client.get("/databases/status", params={"tenant_id": "acme"}, headers=local.headers())
    body = r.json()
    assert r.status_code == 200 and body["data"]["database"] == "acme"
    assert r.headers["deprecation"] == "true"
    assert "tenant_id is deprecated" in r.headers["warning"]
    [notice] = body["meta"]["deprecation"]
    assert notice == {
        "deprecated": True,
        "message": "tenant_id is deprecated; use database instead.",
        "deprecated_since": "2.0.0",
        "deprecated_field": "tenant_id",
        "preferred_field": "database",
    }


def test_canonical_only_has_no_deprecation(local: LocalApp) -> None:
    local.create_ready_database("acme")
    r = local.client.get("/databases/status", params={"database": "acme"}, headers=local.headers())
    assert "deprecation" not in r.json()["meta"]
    assert "deprecation" not in r.headers and "warning" not in r.headers


def test_query_both_names_equal_ok_different_400(local: LocalApp) -> None:
    local.create_ready_database("acme")
    r = local.client.get("/databases/status", params={"database": "acme", "tenant_id": "acme"}, headers=local.headers())
    assert r.status_code == 200 and _dep_fields(r.json()) == ["tenant_id"]
    r = local.client.get(
        "/databases/status", params={"database": "acme", "tenant_id": "other"}, headers=local.headers()
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "INVALID_PARAMETERS"
    assert "tenant_id" in r.json()["error"]["message"] and "database" in r.json()["error"]["message"]


def test_json_alias_and_conflict(local: LocalApp) -> None:
    r = local.client.post("/databases", json={"tenant_id": "legacy_db"}, headers=local.headers())
    assert r.status_code == 202 and r.json()["data"]["database"] == "legacy_db"
    assert _dep_fields(r.json()) == ["tenant_id"]
    r = local.client.post("/databases", json={"tenant_id": "x1", "database": "x1"}, headers=local.headers())
    assert r.status_code == 202 and r.json()["data"]["database"] == "x1"
    r = local.client.post("/databases", json={"tenant_id": "a1", "database": "b1"}, headers=local.headers())
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_PARAMETERS"
    assert {"a1", "b1"}.isdisjoint(local.client.get("/databases", headers=local.headers()).json()["data"]["databases"])


def test_collection_aliases_in_query_and_body(local: LocalApp) -> None:
    local.create_ready_database("acme")
    local.services.databases.note_collection(local.services.keys.authenticate(local.key), "acme", "team")
    r = local.client.request(
        "DELETE",
        "/databases/collections",
        params={"database": "acme", "sub_tenant_id": "team"},
        headers=local.headers(),
    )
    assert r.status_code == 200 and r.json()["data"]["collection"] == "team"
    assert _dep_fields(r.json()) == ["sub_tenant_id"]
    r = local.client.request(
        "DELETE",
        "/databases/collections",
        json={"tenant_id": "acme", "sub_tenant_id": "t2", "collection": "t3"},
        headers=local.headers(),
    )
    assert r.status_code == 400


def test_legacy_routes_dispatch_to_same_handlers(local: LocalApp) -> None:
    r = local.client.post("/tenants", json={"tenant_id": "acme"}, headers=local.headers())
    assert r.status_code == 202
    assert r.headers["deprecation"] == "true"
    messages = [d["message"] for d in r.json()["meta"]["deprecation"]]
    assert any("/tenants" in m for m in messages)
    local.drain()
    r = local.client.get("/tenants/status", params={"tenant_id": "acme"}, headers=local.headers())
    assert r.status_code == 200 and r.json()["data"]["infra"]["ready_for_ingestion"] is True
    r = local.client.patch(
        "/tenants/acme/metadata-schema",
        json={"add_fields": [{"name": "region", "data_type": "VARCHAR"}]},
        headers=local.headers(),
    )
    assert r.status_code == 200 and r.json()["data"]["added_fields"] == ["region"]
    assert local.client.get("/tenants", headers=local.headers()).json()["data"]["databases"] == ["acme"]


def test_legacy_and_canonical_duplicate_rules(local: LocalApp) -> None:
    local.create_ready_database("acme")
    r = local.client.post("/databases", json={"database": "acme"}, headers=local.headers())
    assert r.status_code == 409 and r.json()["error"]["code"] == "DATABASE_ALREADY_EXISTS"
    r = local.client.post("/tenants", json={"tenant_id": "acme"}, headers=local.headers())
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_INPUT"
    # The legacy route keeps DATABASE_NOT_FOUND.
    r = local.client.get("/tenants/status", params={"tenant_id": "nope"}, headers=local.headers())
    assert r.status_code == 404 and r.json()["error"]["code"] == "DATABASE_NOT_FOUND"
    assert r.json()["detail"]["deprecated"] is True


def test_form_fields_use_the_same_rules(tmp_path: Path) -> None:
    echo = APIRouter()

    @echo.post("/echo-form")
    async def echo_form(request: Request) -> dict[str, object]:
        form = await scoped_form(request)
        return {"fields": sorted(form.keys()), "database": form.get("database"), "collection": form.get("collection")}

    la = make_app(tmp_path / "d", extra_routers=[echo])
    try:
        r = la.client.post(
            "/echo-form",
            data={"tenant_id": "acme", "sub_tenant_id": "team"},
            files={"documents": ("a.txt", b"hi", "text/plain")},
            headers=la.headers(),
        )
        assert r.json() == {"fields": ["collection", "database", "documents"], "database": "acme", "collection": "team"}
        assert r.headers["deprecation"] == "true"
        r = la.client.post("/echo-form", data={"tenant_id": "a", "database": "b"}, headers=la.headers())
        assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_PARAMETERS"
        r = la.client.post("/echo-form", data={"database": "acme"}, headers=la.headers())
        assert r.json()["database"] == "acme" and "deprecation" not in r.headers
    finally:
        la.close()
