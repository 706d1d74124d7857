"""Console security against a real `ctxstore serve`: CSRF on every write, organisations apart exactly as
in the API, a revoked key's session ends, cookie flags (Secure over TLS)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute

from ctxstore.console.pages import auth, byog, connectors, databases, graphs, items, keys, playground, webhooks
from tests.console.console_client import ConsoleSession
from tests.fakes.slack_api import FakeSlack
from tests.support.app import make_app
from tests.support.server import ServerProcess

PAGE_MODULES = (auth, keys, databases, items, playground, graphs, byog, webhooks, connectors)
SLACK_TOKEN = "xoxb-security-test-secret"


def _create_key(server: ServerProcess, org: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", "keys", "create", "--org", org, "--data-dir", str(server.data_dir)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip()


@pytest.fixture(scope="module")
def world(server: ServerProcess, admin_key: str, slack: FakeSlack) -> Iterator[dict[str, Any]]:
    """Organisation `default` with a database, an item, a BYOG database, a Slack connector and a second key;
    organisation `other`."""
    api = server.client(admin_key)
    assert api.post("/databases", json={"database": "acme"}).status_code == 202
    r = api.post(
        "/context/ingest",
        data={
            "database": "acme",
            "app_knowledge": '[{"id": "doc-1", "title": "Plan", "type": "note", "content": {"text": "The plan."}}]',
        },
    )
    assert r.status_code == 202, r.text
    assert api.post("/byog/databases", json={"database": "kg"}).status_code == 200
    slack.add_token(SLACK_TOKEN)
    slack.add_channel("C0SEC", "security")
    body = {"provider": "slack", "database": "acme", "credentials": {"access_token": SLACK_TOKEN}}
    made = api.post("/connectors", json=body)
    assert made.status_code == 201, made.text
    connector_id = made.json()["data"]["connector_id"]
    admin = ConsoleSession(server.base_url, admin_key)
    second = _create_key(server, "default")
    other = _create_key(server, "other")
    yield {"api": api, "admin": admin, "second": second, "other": other, "connector": connector_id}
    admin.close()
    api.close()


def _writes() -> list[tuple[str, str]]:
    out = []
    for module in PAGE_MODULES:
        for route in module.router.routes:
            assert isinstance(route, APIRoute)
            for method in route.methods - {"GET", "HEAD"}:
                out.append((method, route.path))
    return sorted(out)


def _fill(path: str, prefix: str, connector_id: str) -> str:
    filled = path.replace("{db}", "acme").replace("{prefix}", prefix).replace("{delivery_id}", "d1")
    return filled.replace("{connector_id}", connector_id)


def test_every_state_changing_console_route_needs_the_csrf_token(server: ServerProcess, world: dict[str, Any]) -> None:
    writes = _writes()
    assert len(writes) >= 20, writes  # every write the console offers, not a sample
    session = ConsoleSession(server.base_url, world["second"])
    target = world["second"].split("_")[1]
    try:
        for method, path in writes:
            url = _fill(path, target, world["connector"])
            for token in (None, "forged-" + session.csrf[:10]):
                data = {
                    "database": "made-by-csrf",
                    "confirm": "acme",
                    "api_key": world["second"],
                    "url": "http://x.test",
                    "provider": "slack",
                    "cred.access_token": SLACK_TOKEN,
                    "sync_interval_seconds": "600",
                    "resource_id": "C0SEC",
                    "sel": "0",
                    "rid.0": "C0SEC",
                }
                r = session.post(url, data, token=token)
                assert r.status_code == 403, (method, url, r.status_code, r.text[:300])
                assert "CSRF" in r.text
        # Nothing happened: no database created, no key revoked, the session still works.
        assert "made-by-csrf" not in world["api"].get("/databases").text
        connector = world["api"].get(f"/connectors/{world['connector']}").json()["data"]
        assert connector["sync_interval_seconds"] == 3600 and connector["active_resource_count"] == 0
        assert len(world["api"].get("/connectors").json()["data"]["connectors"]) == 1
        assert session.get("/keys").status_code == 200
        # The same request with the session's token goes through.
        ok = session.post("/databases", {"database": "made-with-token"})
        assert ok.status_code == 303, ok.text
        assert session.post("/sign-out", token=None).status_code == 403  # signing out is a write too
    finally:
        session.close()


def test_posting_the_key_form_twice_creates_one_key(server: ServerProcess, world: dict[str, Any]) -> None:
    admin = world["admin"]
    page = admin.get("/keys").text
    token = re.search(r'name="form_token" value="([^"]+)"', page)
    assert token
    before = len(re.findall(r"aria-label=\"Revoke key ", page))
    first = admin.post("/keys", {"form_token": token.group(1), "expires_in": "1d"})
    assert first.status_code == 201 and "copy it now" in first.text
    prefix = re.search(r'id="new-key-title">Key <code>([^<]+)</code>', first.text)
    assert prefix
    again = admin.post("/keys", {"form_token": token.group(1), "expires_in": "1d"})
    assert again.status_code == 409 and "no second key was created" in again.text
    assert prefix.group(1) in again.text and 'id="new-key"' not in again.text
    assert len(re.findall(r"aria-label=\"Revoke key ", admin.get("/keys").text)) == before + 1
    # A refused post releases its token: the corrected form goes through once.
    other = re.search(r'name="form_token" value="([^"]+)"', again.text)
    assert other
    bad = admin.post("/keys", {"form_token": other.group(1), "scope": "some"})
    assert bad.status_code == 400
    assert admin.post("/keys", {"form_token": other.group(1)}).status_code == 201
    assert admin.post("/keys", {"form_token": ""}).status_code == 400  # no token: nothing is created


def test_sign_in_needs_its_own_csrf_cookie(server: ServerProcess, admin_key: str) -> None:
    fresh = ConsoleSession(server.base_url)
    try:
        r = fresh.http.post("/sign-in", data={"api_key": admin_key, "csrf_token": "guess"})
        assert r.status_code == 403
        assert "ctxstore_console=" not in r.headers.get("set-cookie", "")
    finally:
        fresh.close()


def _problem(html: str) -> tuple[str, str]:
    headline = re.search(r"<h1>(.*?)</h1>", html)
    code = re.search(r"Error <code>([A-Z_]+)</code>", html)
    assert headline and code, html
    return headline.group(1), code.group(1)


def test_another_organisations_ids_are_not_found_exactly_as_in_the_api(
    server: ServerProcess, world: dict[str, Any]
) -> None:
    theirs = ConsoleSession(server.base_url, world["other"])
    try:
        with server.client(world["other"]) as api:
            api_answer = api.get("/databases/status", params={"database": "acme"})
        assert api_answer.status_code == 404
        api_code = api_answer.json()["error"]["code"]
        pairs = [
            ("/databases/acme", "/databases/nosuchdb"),
            ("/databases/acme/items", "/databases/nosuchdb/items"),
            ("/databases/acme/item?id=doc-1", "/databases/nosuchdb/item?id=doc-1"),
            ("/databases/acme/playground", "/databases/nosuchdb/playground"),
            ("/databases/acme/graph", "/databases/nosuchdb/graph"),
            ("/byog/kg", "/byog/nosuchdb"),
            (f"/connectors/{world['connector']}", "/connectors/conn_nosuchconnector"),
            (f"/connectors/{world['connector']}/discover", "/connectors/conn_nosuchconnector/discover"),
            (f"/connectors/{world['connector']}/state", "/connectors/conn_nosuchconnector/state"),
        ]
        for foreign, missing in pairs:
            a, b = theirs.get(foreign), theirs.get(missing)
            assert a.status_code == b.status_code == 404, (foreign, a.status_code, b.status_code)
            assert _problem(a.text) == _problem(b.text), foreign
            assert "Back to databases" in a.text  # still signed in: only the data is out of reach
        assert _problem(theirs.get("/databases/acme").text)[1] == api_code
        with server.client(world["other"]) as api:
            api_connector = api.get(f"/connectors/{world['connector']}")
        assert api_connector.status_code == 404
        page = theirs.get(f"/connectors/{world['connector']}")
        assert _problem(page.text)[1] == api_connector.json()["error"]["code"]
        for write in ("sync", "interval", "delete"):  # nor can they act on it
            r = theirs.post(f"/connectors/{world['connector']}/{write}", {"sync_interval_seconds": "600"})
            assert r.status_code == 404 and _problem(r.text)[1] == "NOT_FOUND", write
        assert world["connector"] not in theirs.get("/connectors").text
        graph = theirs.get("/databases/acme/graph.json")
        assert graph.status_code == 404 and graph.json()["error"]["code"] == api_code
        # Another organisation's key prefix cannot be revoked: not found, and the key keeps working.
        admin_prefix = world["second"].split("_")[1]
        r = theirs.post(f"/keys/{admin_prefix}/revoke")
        assert r.status_code == 404
        assert _problem(r.text)[1] == "NOT_FOUND"
        with server.client(world["second"]) as api:
            assert api.get("/databases").status_code == 200
        assert "/console/databases/acme" not in theirs.get("/databases").text
        assert admin_prefix not in theirs.get("/keys").text
    finally:
        theirs.close()


def test_a_revoked_keys_session_stops_working(server: ServerProcess, world: dict[str, Any]) -> None:
    key = _create_key(server, "default")
    prefix = key.split("_")[1]
    session = ConsoleSession(server.base_url, key)
    try:
        assert session.get("/databases").status_code == 200
        r = world["admin"].post(f"/keys/{prefix}/revoke")
        assert r.status_code == 303  # Post/Redirect/Get: the keys page says it
        assert "is revoked" in world["admin"].get(r.headers["location"].removeprefix("/console")).text
        gone = session.get("/databases")
        assert gone.status_code == 303 and gone.headers["location"].endswith("/console/sign-in?ended=key")
        write = session.post("/databases", {"database": "after-revoke"})
        assert write.status_code in (303, 401) and "after-revoke" not in world["api"].get("/databases").text
        assert session.get("/keys").status_code == 303  # the session record is gone, not just refused once
    finally:
        session.close()


def test_revoking_your_own_key_signs_you_out(server: ServerProcess) -> None:
    key = _create_key(server, "default")
    session = ConsoleSession(server.base_url, key)
    try:
        r = session.post(f"/keys/{key.split('_')[1]}/revoke")
        assert r.status_code == 303 and r.headers["location"].endswith("/sign-in?ended=key")
        assert session.get("/databases").status_code == 303
    finally:
        session.close()


def test_session_cookie_flags_and_secure_over_tls(tmp_path: Path) -> None:
    local = make_app(tmp_path / "data")
    try:
        for base_url, secure in (("http://testserver", False), ("https://testserver", True)):
            client = local.client
            client.base_url = base_url  # type: ignore[assignment]
            page = client.get("/console/sign-in")
            token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
            assert token
            r = client.post(
                "/console/sign-in",
                data={"api_key": local.key, "csrf_token": token.group(1)},
                follow_redirects=False,
            )
            assert r.status_code == 303
            cookie = next(c for c in r.headers.get_list("set-cookie") if c.startswith("ctxstore_console="))
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
            assert ("Secure" in cookie) is secure
            assert local.key.split("_")[2] not in cookie
            assert r.headers["content-security-policy"].startswith("default-src 'self'")
            client.cookies.clear()
    finally:
        local.close()
