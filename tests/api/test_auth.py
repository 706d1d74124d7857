"""API keys, the 401/403 rules and isolation between organisations."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxstore.domain.api_keys import split
from tests.support.app import LocalApp, make_app

CORE_ROUTES = [
    ("GET", "/databases"),
    ("POST", "/databases"),
    ("GET", "/databases/status?database=x"),
    ("DELETE", "/databases/collections?database=x&collection=c"),
    ("POST", "/query"),
]


@pytest.mark.parametrize(("method", "path"), CORE_ROUTES)
def test_missing_key_is_401_on_core(local: LocalApp, method: str, path: str) -> None:
    r = local.client.request(method, path)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "UNAUTHORIZED" and r.json()["success"] is False


def test_missing_or_bad_key_is_403_on_byog(local: LocalApp) -> None:
    for headers in ({}, {"Authorization": "Bearer csk_nope"}, {"Authorization": "Basic abc"}):
        r = local.client.post(
            "/byog/query", json={"database": "d", "collection": "c", "query": "RETURN 1"}, headers=headers
        )
        assert r.status_code == 403
        body = r.json()
        assert body["error"]["code"] == "FORBIDDEN"
        assert body["detail"]["error_code"] == "FORBIDDEN"  # BYOG mirrors the error in detail


def test_key_format(local: LocalApp) -> None:
    parts = split(local.key)
    assert parts is not None
    prefix, secret = parts
    assert local.key.startswith("csk_") and len(prefix) == 12 and len(secret) >= 32


@pytest.mark.parametrize(
    "auth",
    [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer csk_short_abc",
        "Bearer not-a-key-at-all",
        "Token csk_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    ],
)
def test_malformed_or_non_bearer_is_401(local: LocalApp, auth: str) -> None:
    r = local.client.get("/databases", headers={"Authorization": auth})
    assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED"


def test_wrong_secret_for_known_prefix_is_401(local: LocalApp) -> None:
    prefix, _ = split(local.key)  # type: ignore[misc]
    forged = f"csk_{prefix}_{'A' * 40}"
    assert local.client.get("/databases", headers=local.headers(forged)).status_code == 401


def test_two_authorization_headers_is_401(local: LocalApp) -> None:
    headers = [("Authorization", f"Bearer {local.key}"), ("Authorization", f"Bearer {local.key}")]
    r = local.client.get("/databases", headers=headers)
    assert r.status_code == 401 and "exactly one" in r.json()["error"]["message"]


def test_revoked_key_is_401(local: LocalApp) -> None:
    key = local.services.keys.create("default")
    assert local.client.get("/databases", headers=local.headers(key)).status_code == 200
    prefix, _ = split(key)  # type: ignore[misc]
    assert local.services.keys.revoke(prefix)
    r = local.client.get("/databases", headers=local.headers(key))
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]


def test_expired_key_is_401(local: LocalApp) -> None:
    key = local.services.keys.create("default", expires_in_s=1)
    assert local.client.get("/databases", headers=local.headers(key)).status_code == 200
    real_now = local.container.clock.now
    local.container.clock.now = lambda: real_now() + 5  # type: ignore[method-assign]
    r = local.client.get("/databases", headers=local.headers(key))
    assert r.status_code == 401 and "expired" in r.json()["error"]["message"]


def test_secret_is_not_stored(local: LocalApp) -> None:
    _, secret = split(local.key)  # type: ignore[misc]
    stored = b"".join(p.read_bytes() for p in local.data_dir.glob("records.db*"))
    assert stored and secret.encode() not in stored


def test_key_limited_to_databases_gets_403_elsewhere(local: LocalApp) -> None:
    local.create_ready_database("allowed")
    local.create_ready_database("secret")
    limited = local.services.keys.create("default", databases=["allowed"])
    r = local.client.get("/databases/status", params={"database": "allowed"}, headers=local.headers(limited))
    assert r.status_code == 200
    r = local.client.get("/databases/status", params={"database": "secret"}, headers=local.headers(limited))
    assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN"
    r = local.client.post("/databases", json={"database": "new_one"}, headers=local.headers(limited))
    assert r.status_code == 403
    assert local.client.get("/databases", headers=local.headers(limited)).json()["data"]["databases"] == ["allowed"]


def test_plan_limit_is_403(tmp_path: Path) -> None:
    la = make_app(tmp_path / "d", max_databases_per_org=1)
    try:
        assert la.client.post("/databases", json={"database": "one"}, headers=la.headers()).status_code == 202
        r = la.client.post("/databases", json={"database": "two"}, headers=la.headers())
        assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN"
        assert "limit" in r.json()["error"]["message"]
    finally:
        la.close()


def test_other_organisation_database_is_indistinguishable_from_missing(local: LocalApp, other_key: str) -> None:
    local.create_ready_database("acme")
    mine = local.headers()
    theirs = local.headers(other_key)
    calls = [
        ("GET", "/databases/status?database={db}", None),
        ("GET", "/databases/collections?database={db}", None),
        ("GET", "/databases/stats?database={db}", None),
        ("GET", "/databases/{db}/metadata-schema", None),
        ("PATCH", "/databases/{db}/metadata-schema", {"add_fields": [{"name": "f", "data_type": "BOOL"}]}),
        ("DELETE", "/databases/collections?database={db}&collection=c", None),
        ("DELETE", "/databases?database={db}", None),
    ]
    for method, path, body in calls:
        foreign = local.client.request(method, path.format(db="acme"), json=body, headers=theirs)
        missing = local.client.request(method, path.format(db="never_existed"), json=body, headers=mine)
        assert foreign.status_code == missing.status_code == 404, (method, path)
        assert foreign.json()["error"]["code"] == missing.json()["error"]["code"] == "DATABASE_NOT_FOUND"
        assert foreign.json()["error"]["message"] == missing.json()["error"]["message"].replace("never_existed", "acme")
    assert local.client.get("/databases", headers=theirs).json()["data"]["databases"] == []
    # The other organisation can own a database with the same name, independently.
    assert local.client.post("/databases", json={"database": "acme"}, headers=theirs).status_code == 202
    local.drain()
    assert local.client.get("/databases/status?database=acme", headers=mine).status_code == 200
    local.client.request("DELETE", "/databases?database=acme", headers=theirs)
    assert local.client.get("/databases/status?database=acme", headers=mine).status_code == 200
