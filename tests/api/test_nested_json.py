"""Issue 12 item 6: nesting is bounded before any JSON decoder runs, on every route and every JSON form field.

A thousand `[` used to raise RecursionError: a plain-text 500 or a reset connection on JSON routes, an
enveloped 500 inside the ingest form. Now each is a 400 INVALID_PARAMETERS in the envelope.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from ctxstore.domain.json_limits import MAX_JSON_DEPTH, json_depth
from tests.support.app import LocalApp
from tests.support.server import ServerProcess

DEEP = "[" * 1000 + "]" * 1000
DEEP_BODY = '{"database":"d","query":"q","metadata_filters":' + DEEP + "}"
WRITE_METHODS = {"POST", "PATCH", "PUT", "DELETE"}
FORM_JSON_FIELDS = ("document_metadata", "app_knowledge", "memories", "graph_payload", "uploads")


def _json_routes(local: LocalApp) -> list[tuple[str, str]]:
    """Every (method, concrete path) the app documents with a body, so a new route is covered by itself."""
    found: list[tuple[str, str]] = []
    for path, ops in local.app.openapi()["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        found += [(m.upper(), concrete) for m in sorted(ops) if m.upper() in WRITE_METHODS]
    return found


def _assert_400(r: httpx.Response, where: str) -> None:
    assert r.status_code == 400, (where, r.status_code, r.text[:300])
    body = r.json()
    assert body["success"] is False and body["error"]["code"] in ("INVALID_PARAMETERS", "FORBIDDEN"), (where, body)
    if body["error"]["code"] == "INVALID_PARAMETERS":
        assert "deeper than" in body["error"]["message"], (where, body)


def test_every_body_route_answers_deep_json_with_400(local: LocalApp) -> None:
    local.create_ready_database("d")
    routes = _json_routes(local)
    assert len(routes) >= 15, routes  # the enumeration itself must find the app's routes
    for method, path in routes:
        if path.startswith("/blobs/"):
            continue  # the token is the credential; a bad one is 403 before any body is read (test_blob_tokens)
        for ctype in ("application/json", None, "application/merge-patch+json"):
            headers = local.headers(**({"Content-Type": ctype} if ctype else {}))
            r = local.client.request(method, path, content=DEEP_BODY, headers=headers)
            if r.status_code == 400:
                _assert_400(r, f"{method} {path} {ctype}")
            else:
                # A route that reads no JSON body at all (multipart ingest, for example) may refuse it its own way,
                # but never with a server error.
                assert r.status_code < 500, (method, path, ctype, r.status_code, r.text[:300])


@pytest.mark.parametrize("field", FORM_JSON_FIELDS)
def test_deep_json_in_ingest_form_fields_is_400(local: LocalApp, field: str) -> None:
    local.create_ready_database("d")
    form = {"database": "d", field: DEEP}
    if field == "memories":
        form["type"] = "memory"
    elif field != "app_knowledge":  # a valid item, so parsing reaches the field under test
        form["app_knowledge"] = json.dumps([{"id": "a", "title": "t", "content": {"text": "x"}}])
    r = local.client.post("/context/ingest", data=form, headers=local.headers())
    _assert_400(r, field)


def test_nesting_within_the_bound_still_works(local: LocalApp) -> None:
    local.create_ready_database("d")
    ok = {"database": "d", "query": "hello", "metadata_filters": {"additional_metadata": {"k": ["a", "b"]}}}
    assert local.client.post("/query", json=ok, headers=local.headers()).status_code == 200
    at_limit = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)  # inside the body's own object
    assert json_depth("{" + at_limit + "}") == MAX_JSON_DEPTH
    # Exactly at the bound the body passes the guard and gets the route's ordinary type error, not the depth one.
    r = local.client.post(
        "/query",
        content='{"database":"d","query":"q","metadata_filters":' + at_limit + "}",
        headers=local.headers(**{"Content-Type": "application/json"}),
    )
    assert r.status_code == 400 and "deeper than" not in r.json()["error"]["message"]
    # Brackets inside strings are text, not nesting.
    r = local.client.post("/query", json={"database": "d", "query": DEEP}, headers=local.headers())
    assert r.status_code == 200, r.text


def test_real_server_answers_every_issue_route_without_reset(tmp_path: Path) -> None:
    """The routes the issue lists, over a real socket: an enveloped 400 each time, never a dropped connection."""
    with ServerProcess(tmp_path / "data") as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        with srv.client(key) as c:
            assert c.post("/databases", json={"database": "d"}).status_code == 202
            routes = [
                ("POST", "/query"),
                ("POST", "/context/list"),
                ("POST", "/databases"),
                ("PATCH", "/databases/d/metadata-schema"),
                ("DELETE", "/context"),
                ("PATCH", "/context/x/metadata"),
                ("POST", "/byog/query"),
                ("POST", "/webhooks/indexing"),
            ]
            for method, path in routes:
                r = c.request(method, path, content=DEEP_BODY, headers={"Content-Type": "application/json"})
                assert r.status_code in (400, 403), (method, path, r.status_code, r.text[:200])
                assert r.headers["content-type"].startswith("application/json")
                if path.startswith("/webhooks"):
                    continue  # webhook routes answer without the envelope (the spec), still a 400
                _assert_400(r, path)
            r = c.post("/context/ingest", data={"database": "d", "app_knowledge": DEEP})
            _assert_400(r, "ingest form")
            assert json.loads(c.get("/health").text)  # the server is still up
