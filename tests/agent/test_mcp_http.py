"""MCP over Streamable HTTP at /mcp on a real `ctxstore serve`: auth, DNS-rebinding checks, scoping, one lifecycle."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.agent.conftest import Served
from tests.agent.mcp_support import ToolResult, over_http

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def _post(served: Served, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(served.url + "/mcp", json=LIST_TOOLS, headers={**ACCEPT, **headers}, timeout=30)


def _wait_completed(call: Any, ids: list[str], timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = call("ctxstore_status", {"ids": ids}).text
        if text.endswith("All done.") or time.monotonic() > deadline:
            return str(text)
        time.sleep(0.3)


def test_every_request_needs_a_valid_key(served: Served) -> None:
    assert _post(served, {}).status_code == 401
    bad = _post(served, {"Authorization": "Bearer csk_abc_def"})
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "UNAUTHORIZED"
    ok = _post(served, {"Authorization": f"Bearer {served.key}"})
    assert ok.status_code == 200 and len(ok.json()["result"]["tools"]) == 14
    assert httpx.get(served.url + "/health").status_code == 200  # the one thing open without a key


def test_dns_rebinding_protection(served: Served) -> None:
    auth = {"Authorization": f"Bearer {served.key}"}
    rebound = _post(served, {**auth, "Host": "attacker.example"})
    assert rebound.status_code == 421
    foreign_page = _post(served, {**auth, "Origin": "https://attacker.example"})
    assert foreign_page.status_code == 403
    local_page = _post(served, {**auth, "Origin": f"http://localhost:{served.server.port}"})
    assert local_page.status_code == 200


def test_lifecycle_over_http_in_both_protocol_eras(served: Served) -> None:
    db = served.ready_database("mcp")
    headers = {"Authorization": f"Bearer {served.key}", "X-Ctxstore-Database": db}
    legacy = over_http(served.url + "/mcp", headers, mode="legacy")  # initialize handshake (2025 clients)
    modern = over_http(served.url + "/mcp", headers, mode="auto")  # sessionless 2026-07-28 requests
    stored = legacy("ctxstore_ingest", {"text": "Our office dog is a beagle named Biscuit.", "type": "knowledge"})
    [item] = stored.ids
    assert not stored.is_error and "queued" in stored.text
    assert f"{item}: completed" in _wait_completed(modern, [item])
    found: ToolResult = modern("ctxstore_query", {"query": "what is the office dog called", "mode": "fast"})
    assert f"source_id={item}" in found.text and "Biscuit" in found.text
    assert "beagle" in legacy("ctxstore_inspect", {"source_id": item}).text
    assert modern("ctxstore_delete", {"ids": [item], "type": "knowledge"}).text.startswith("Deleted 1 of 1")
    assert "not found" in legacy("ctxstore_status", {"ids": [item]}).text


def test_scope_headers_overrides_and_organisations(served: Served) -> None:
    db = served.ready_database("scoped")
    base = {"Authorization": f"Bearer {served.key}", "X-Ctxstore-Database": db}
    team_a = over_http(served.url + "/mcp", {**base, "X-Ctxstore-Collection": "team-a"}, mode="auto")
    team_b = over_http(served.url + "/mcp", {**base, "X-Ctxstore-Collection": "team-b"}, mode="auto")
    [item] = team_a("ctxstore_ingest", {"text": "Team A's launch is on Friday.", "type": "knowledge"}).ids
    _wait_completed(team_a, [item])
    assert f"source_id={item}" in team_a("ctxstore_query", {"query": "launch day", "mode": "fast"}).text
    assert team_b("ctxstore_query", {"query": "launch day", "mode": "fast"}).text.startswith("No results")
    override = team_b("ctxstore_query", {"query": "launch day", "collection": "team-a", "mode": "fast"})
    assert f"source_id={item}" in override.text

    stranger_key = served.new_key("stranger")
    stranger = over_http(served.url + "/mcp", {"Authorization": f"Bearer {stranger_key}", "X-Ctxstore-Database": db})
    for name, args in (
        ("ctxstore_query", {"query": "launch day"}),
        ("ctxstore_list", {}),
        ("ctxstore_inspect", {"source_id": item}),
    ):
        seen = stranger(name, args)
        assert seen.is_error and "DATABASE_NOT_FOUND" in seen.text, (name, seen)
    no_scope = over_http(served.url + "/mcp", {"Authorization": f"Bearer {served.key}"})
    refused = no_scope("ctxstore_query", {"query": "launch day"})
    assert refused.is_error and "X-Ctxstore-Database" in refused.text


def test_no_standing_streams(served: Served) -> None:
    # Stateless JSON mode: no GET event stream that would hold a connection (and an admission slot) open.
    r = httpx.get(served.url + "/mcp", headers={"Authorization": f"Bearer {served.key}"}, timeout=10)
    assert r.status_code == 405 and r.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
