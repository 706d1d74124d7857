"""Every MCP tool through an MCP client session, in-process, against the real services of a local app."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from ctxstore.mcp.backend import Defaults
from ctxstore.mcp.service_backend import ServiceBackend
from ctxstore.mcp.tools import build_server
from ctxstore.mcp.url_fetch import FetchRefused, fetch
from ctxstore.services.access.principal import Principal
from tests.agent.mcp_support import ToolResult, in_process
from tests.support.app import LocalApp, make_app

TOOLS = {
    "ctxstore_query",
    "ctxstore_ingest",
    "ctxstore_ingest_document",
    "ctxstore_status",
    "ctxstore_list",
    "ctxstore_inspect",
    "ctxstore_delete",
    "ctxstore_relations",
    "ctxstore_subgraph",
    "ctxstore_graph_query",
    "ctxstore_graph_collections",
    "ctxstore_graph_admin",
    "ctxstore_list_databases",
    "ctxstore_create_database",
}
STORE_TOOLS = ("ctxstore_ingest", "ctxstore_list", "ctxstore_delete", "ctxstore_relations", "ctxstore_subgraph")


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    app = make_app(tmp_path_factory.mktemp("mcp"), allow_private_webhooks=True)
    app.create_ready_database("kb")
    app.create_ready_database("side")
    yield app
    app.close()


def _caller(local: LocalApp, defaults: Defaults, key: str | None = None) -> Any:
    principal: Principal = local.services.keys.authenticate(key or local.key)
    server = build_server(lambda ctx: (ServiceBackend(local.services, principal), defaults))
    return in_process(server)


@pytest.fixture(scope="module")
def call(local: LocalApp) -> Any:
    return _caller(local, Defaults(database="kb"))


def _ok(result: ToolResult) -> str:
    assert not result.is_error, result.text
    return result.text


def test_tool_list_descriptions_and_schemas(local: LocalApp) -> None:
    server = build_server(lambda ctx: (ServiceBackend(local.services, Principal("default", "x")), Defaults()))

    async def listed() -> Any:
        async with Client(server) as c:
            return (await c.list_tools()).tools

    tools = {t.name: t for t in anyio.run(listed)}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and len(t.description) > 40
        for name, prop in t.input_schema["properties"].items():
            assert prop.get("description"), f"{t.name}.{name} has no description"
    assert tools["ctxstore_query"].input_schema["required"] == ["query"]
    assert tools["ctxstore_query"].input_schema["properties"]["type"]["enum"] == ["all", "knowledge", "memory"]
    for name in STORE_TOOLS:  # the store is `type`, as in the API and the command line; `kind` is a deprecated alias
        props = tools[name].input_schema["properties"]
        assert "type" in props and props["kind"].get("deprecated") is True, name
    assert tools["ctxstore_delete"].input_schema["required"] == ["ids"]  # `type` is checked in the call (alias)
    assert "Required" in tools["ctxstore_delete"].input_schema["properties"]["type"]["description"]
    assert tools["ctxstore_create_database"].annotations.read_only_hint is False
    assert tools["ctxstore_list_databases"].annotations.read_only_hint is True
    assert tools["ctxstore_delete"].annotations.destructive_hint is True
    assert tools["ctxstore_query"].annotations.read_only_hint is True


def test_memory_lifecycle_ingest_status_query_inspect_list_delete(local: LocalApp, call: Any) -> None:
    accepted = call(
        "ctxstore_ingest", {"text": "I prefer aisle seats on long-haul flights.", "title": "Seat preference"}
    )
    text = _ok(accepted)
    [item_id] = accepted.ids
    assert "queued" in text and "ctxstore_status" in text  # returns at once and says how to follow up
    assert "queued" in _ok(call("ctxstore_status", {"ids": [item_id]}))

    local.drain()
    status = _ok(call("ctxstore_status", {"ids": [item_id, "no-such-id"]}))
    assert f"{item_id}: completed" in status and "no-such-id: not found" in status

    found = _ok(call("ctxstore_query", {"query": "which seat does the user like", "type": "memory", "mode": "fast"}))
    assert f"source_id={item_id}" in found and '"Seat preference"' in found and "aisle" in found
    assert found.splitlines()[1].startswith("[1] score")  # a header line, then ranked results

    read = _ok(call("ctxstore_inspect", {"source_id": item_id}))
    assert "aisle seats" in read and '"Seat preference"' in read
    assert "prefers aisle seats" in read  # infer=true (the tool default) added what it inferred
    listed = _ok(call("ctxstore_list", {"type": "memory"}))
    assert f"id={item_id}" in listed and "completed" in listed

    gone = _ok(call("ctxstore_delete", {"ids": [item_id, "never-was"], "type": "memory"}))
    assert gone.startswith("Deleted 1 of 2") and "never-was" in gone
    assert "not found" in _ok(call("ctxstore_status", {"ids": [item_id]}))
    after = _ok(call("ctxstore_query", {"query": "aisle seats", "type": "memory", "mode": "fast"}))
    assert item_id not in after


def test_conversation_and_knowledge_note_with_graph_tools(local: LocalApp, call: Any) -> None:
    conv = call(
        "ctxstore_ingest",
        {
            "turns": [{"user": "Book me a table at Luigi's, I love Italian food.", "assistant": "Booked for 8pm."}],
            "user_name": "Sam",
            "source_id": "conv-1",
        },
    )
    note = call(
        "ctxstore_ingest",
        {"text": "Acme Zoo was founded by Jane Doe in Paris.", "type": "knowledge", "source_id": "note-1"},
    )
    assert conv.ids == ["conv-1"] and note.ids == ["note-1"]
    local.drain()
    knowledge = _ok(call("ctxstore_query", {"query": "who founded Acme Zoo", "type": "knowledge", "mode": "thinking"}))
    assert "source_id=note-1" in knowledge and "conv-1" not in knowledge
    assert "--founded_by-->" in knowledge  # graph context, as quotable lines
    memory = _ok(call("ctxstore_query", {"query": "Italian food", "type": "memory", "graph_context": False}))
    assert "source_id=conv-1" in memory
    rel = _ok(call("ctxstore_relations", {"source_id": "note-1"}))
    assert "Acme Zoo" in rel and "Jane Doe" in rel and "founded_by" in rel
    sub = _ok(call("ctxstore_subgraph", {"source_id": "note-1"}))
    assert "depth 0: source_id=note-1" in sub
    assert "empty" in _ok(call("ctxstore_subgraph", {"source_id": "nothing-here"}))


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def test_documents_by_content_url_and_path(local: LocalApp, call: Any, tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text("# Guide\nThe launch code word is PELICAN.")
    handler = lambda *a, **k: _Files(*a, directory=str(tmp_path), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        by_url = call("ctxstore_ingest_document", {"url": f"http://127.0.0.1:{httpd.server_port}/guide.md"})
        assert "guide.md" in _ok(by_url) and "queued" in by_url.text
        missing = call("ctxstore_ingest_document", {"url": f"http://127.0.0.1:{httpd.server_port}/nope.md"})
        assert missing.is_error and "HTTP 404" in missing.text
    finally:
        httpd.shutdown()
    inline = call(
        "ctxstore_ingest_document",
        {
            "content_base64": base64.b64encode(b"Quarterly revenue grew 12 percent.").decode(),
            "filename": "q3.txt",
            "source_id": "q3",
            "additional_metadata": {"team": "finance"},
        },
    )
    assert inline.ids == ["q3"]
    rejected = call(
        "ctxstore_ingest_document", {"content_base64": base64.b64encode(b"x").decode(), "filename": "a.heic"}
    )
    assert not rejected.is_error and "failed E1002" in rejected.text  # a rejected kind is reported, not a crash
    on_server = call("ctxstore_ingest_document", {"path": "/etc/passwd"})
    assert on_server.is_error and "only read by `ctxstore mcp` over stdio" in on_server.text
    two = call("ctxstore_ingest_document", {"path": "a", "url": "http://example.com/a"})
    assert two.is_error and two.text.endswith("give exactly one of `url`, `path` or `content_base64`")
    local.drain()
    hits = _ok(call("ctxstore_query", {"query": "launch code word", "type": "knowledge", "mode": "fast"}))
    assert "PELICAN" in hits and '"guide.md"' in hits
    filtered = _ok(
        call(
            "ctxstore_query",
            {"query": "revenue", "metadata_filters": {"additional_metadata": {"team": "finance"}}, "type": "knowledge"},
        )
    )
    assert "source_id=q3" in filtered and "guide.md" not in filtered


def test_url_fetch_refuses_private_addresses_unless_allowed() -> None:
    with pytest.raises(FetchRefused, match="only public addresses"):
        fetch("http://127.0.0.1:9/x")
    with pytest.raises(FetchRefused, match="metadata"):
        fetch("http://169.254.169.254/latest/meta-data/", allow_private=True)  # never, even when allowed
    with pytest.raises(FetchRefused, match="only http and https"):
        fetch("file:///etc/passwd")


def test_byog_trio(call: Any) -> None:
    assert "is ready" in _ok(call("ctxstore_graph_admin", {"action": "create_database", "database": "g1"}))
    write = call(
        "ctxstore_graph_query",
        {
            "query": "CREATE (:Person {name: $n})-[:KNOWS]->(:Person {name: 'Bo'})",
            "params": {"n": "Ada"},
            "database": "g1",
        },
    )
    assert _ok(write) == "0 rows."
    rows = _ok(
        call(
            "ctxstore_graph_query",
            {"query": "MATCH (a)-[:KNOWS]->(b) RETURN a.name AS a, b.name AS b", "database": "g1", "max_rows": 5},
        )
    )
    assert rows == '1 rows:\n{"a": "Ada", "b": "Bo"}'
    assert _ok(call("ctxstore_graph_collections", {"database": "g1"})) == '1 graphs in BYOG database "g1": default'
    refused = call("ctxstore_graph_query", {"query": "CALL db.labels()", "database": "g1"})
    assert refused.is_error and "INVALID" in refused.text
    assert "dropped" in _ok(
        call("ctxstore_graph_admin", {"action": "drop_collection", "database": "g1", "collection": "default"})
    )
    assert "dropped with" in _ok(call("ctxstore_graph_admin", {"action": "drop_database", "database": "g1"}))
    gone = call("ctxstore_graph_collections", {"database": "g1"})
    assert gone.is_error and "DATABASE_NOT_FOUND" in gone.text


def test_scope_defaults_overrides_and_errors(local: LocalApp) -> None:
    no_default = _caller(local, Defaults())
    missing = no_default("ctxstore_query", {"query": "x"})
    assert missing.is_error and "INVALID_PARAMETERS: no database" in missing.text
    side = _caller(local, Defaults(database="side", collection="team-a"))
    stored = side("ctxstore_ingest", {"text": "The side project is called Falcon.", "type": "knowledge"})
    [item] = stored.ids
    assert 'database "side", collection "team-a"' in stored.text
    local.drain()
    assert item in _ok(side("ctxstore_query", {"query": "side project name", "mode": "fast"}))
    other_col = _ok(side("ctxstore_query", {"query": "side project name", "collection": "team-b", "mode": "fast"}))
    assert other_col.startswith("No results")
    per_call = _ok(no_default("ctxstore_query", {"query": "Falcon", "database": "side", "collection": "team-a"}))
    assert item in per_call
    unknown = side("ctxstore_list", {"database": "nope"})
    assert unknown.is_error and "DATABASE_NOT_FOUND" in unknown.text
    bad = side("ctxstore_query", {"query": "x", "max_results": 500})  # schema validation, as a tool error
    assert bad.is_error and "max_results" in bad.text
    stranger = _caller(local, Defaults(database="side"), key=local.services.keys.create("stranger-org"))
    hidden = stranger("ctxstore_query", {"query": "Falcon"})
    assert hidden.is_error and "DATABASE_NOT_FOUND" in hidden.text  # another organisation's database does not exist


def test_query_and_subgraph_tools_charge_the_query_rate_class(tmp_path: Path) -> None:
    """POST /query and the subgraph reads share the `query` rate class; through /mcp they must too, or an
    agent could query past its key's query limit (the HTTP middleware charges /mcp to the default class)."""
    app = make_app(tmp_path, query_rate_limit_per_minute=1)
    try:
        app.create_ready_database("kb")
        call = _caller(app, Defaults(database="kb"))
        _ok(call("ctxstore_query", {"query": "anything", "mode": "fast"}))
        limited = call("ctxstore_subgraph", {"source_id": "nothing-here"})
        assert limited.is_error and "RATE_LIMITED" in limited.text, limited.text
        assert "RATE_LIMITED" in call("ctxstore_query", {"query": "again", "mode": "fast"}).text
        assert not call("ctxstore_status", {"ids": ["x"]}).is_error  # other tools are not in the query class
    finally:
        app.close()


def test_type_names_the_store_and_the_old_kind_still_works(local: LocalApp, call: Any) -> None:
    assert _ok(call("ctxstore_ingest", {"text": "Typed note about otters.", "type": "knowledge", "source_id": "t-1"}))
    old = call("ctxstore_ingest", {"text": "Kind note about otters.", "kind": "knowledge", "source_id": "k-1"})
    assert _ok(old) and old.ids == ["k-1"]  # an older client sending `kind` is still understood
    local.drain()
    for args in ({"type": "knowledge"}, {"kind": "knowledge"}):
        listed = _ok(call("ctxstore_list", args))
        assert "id=t-1" in listed and "id=k-1" in listed
    assert "id=t-1" not in _ok(call("ctxstore_list", {"type": "memory"}))
    assert "depth 0: source_id=t-1" in _ok(call("ctxstore_subgraph", {"source_id": "t-1", "kind": "knowledge"}))
    clash = call("ctxstore_list", {"type": "knowledge", "kind": "memory"})
    assert (
        clash.is_error and "INVALID_PARAMETERS: `type` is knowledge but the deprecated `kind` is memory" in clash.text
    )
    untyped = call("ctxstore_delete", {"ids": ["t-1"]})
    assert untyped.is_error and untyped.text.endswith("`type` is required: knowledge or memory")
    assert _ok(call("ctxstore_delete", {"ids": ["t-1"], "type": "knowledge"})).startswith("Deleted 1 of 1")
    assert _ok(call("ctxstore_delete", {"ids": ["k-1"], "kind": "knowledge"})).startswith("Deleted 1 of 1")


def test_an_agent_creates_its_first_database(local: LocalApp) -> None:
    newcomer = local.services.keys.create("newcomer-org")
    call = _caller(local, Defaults(database="notes"), key=newcomer)
    assert _ok(call("ctxstore_list_databases", {})) == (
        'No databases yet. The connection\'s default "notes": create it with ctxstore_create_database.'
    )
    missing = call("ctxstore_ingest", {"text": "hello"})
    assert missing.is_error and "DATABASE_NOT_FOUND" in missing.text and "ctxstore_create_database" in missing.text
    created = _ok(call("ctxstore_create_database", {"wait_seconds": 0}))  # no worker runs here until drain()
    assert created.startswith('Database "notes" created; still provisioning.') and "ctxstore_list_databases" in created
    local.drain()
    assert _ok(call("ctxstore_list_databases", {})) == "1 databases:\n- notes (ready, the connection's default)"
    other = _ok(call("ctxstore_create_database", {"database": "scratch", "wait_seconds": 0}))
    assert 'pass database="scratch"' in other
    taken = call("ctxstore_create_database", {"database": "notes"})
    assert taken.is_error and "DATABASE_ALREADY_EXISTS" in taken.text
    bad = call("ctxstore_create_database", {"database": "no spaces allowed"})
    assert bad.is_error and "INVALID" in bad.text
    assert not call("ctxstore_ingest", {"text": "My cat is called Miso."}).is_error
    unnamed = _caller(local, Defaults(), key=newcomer)("ctxstore_create_database", {})
    assert unnamed.is_error and "give `database`" in unnamed.text
