"""`ctxstore mcp` over stdio, as a desktop agent starts it, reaching a real `ctxstore serve` with its key."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.agent.conftest import Served


async def _text(c: Client, name: str, args: dict[str, object]) -> tuple[bool, str]:
    result = await c.call_tool(name, args)
    return bool(result.is_error), "\n".join(getattr(b, "text", "") for b in result.content)


def _params(served: Served, database: str, tmp_path: Path) -> StdioServerParameters:
    env = {
        **os.environ,
        "CTXSTORE_URL": served.url,
        "CTXSTORE_API_KEY": served.key,
        "CTXSTORE_DATABASE": database,
        "CTXSTORE_CONFIG": str(tmp_path / "none.json"),
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "ctxstore.cli", "mcp"], env=env)


def test_stdio_server_reads_env_and_local_files(served: Served, tmp_path: Path) -> None:
    db = served.ready_database("stdio")
    doc = tmp_path / "handbook.md"
    doc.write_text("# Handbook\nNew hires get a green badge on their first day.")

    async def session() -> None:
        async with Client(_params(served, db, tmp_path)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert len(names) == 14 and "ctxstore_query" in names
            err, accepted = await _text(c, "ctxstore_ingest_document", {"path": str(doc), "source_id": "hb"})
            assert not err and "id=hb" in accepted and "handbook.md" in accepted  # the agent's own file, read here
            with anyio.fail_after(90):
                while "hb: completed" not in (
                    status := (await _text(c, "ctxstore_status", {"ids": ["hb", "nope"]}))[1]
                ):
                    await anyio.sleep(0.3)
            assert "nope: not found" in status
            err, found = await _text(c, "ctxstore_query", {"query": "what colour is the badge", "mode": "fast"})
            assert not err and "source_id=hb" in found and "green badge" in found
            err, listed = await _text(c, "ctxstore_list", {"database": "no-such-db"})
            assert err and "DATABASE_NOT_FOUND" in listed

    anyio.run(session)


def test_an_agent_starts_from_nothing_and_stderr_carries_no_request_logs(served: Served, tmp_path: Path) -> None:
    """An MCP-only agent whose configured database does not exist yet: it lists, creates, stores and finds.
    Desktop agents show the server's stderr as errors, so routine request logs must stay off it."""
    db = f"fresh-{uuid.uuid4().hex[:8]}"
    errlog = tmp_path / "stderr.log"

    async def session() -> None:
        with errlog.open("w") as err_fh:
            async with Client(stdio_client(_params(served, db, tmp_path), errlog=err_fh)) as c:
                err, before = await _text(c, "ctxstore_list_databases", {})
                assert not err and f'"{db}"' in before and "create it with ctxstore_create_database" in before
                err, missing = await _text(c, "ctxstore_ingest", {"text": "x"})
                assert err and missing.endswith("or create it with ctxstore_create_database)")
                err, created = await _text(c, "ctxstore_create_database", {})
                assert not err and created.startswith(f'Database "{db}" created and ready'), created
                err, after = await _text(c, "ctxstore_list_databases", {})
                assert f"- {db} (ready, the connection's default)" in after
                err, again = await _text(c, "ctxstore_create_database", {"database": db})
                assert err and "DATABASE_ALREADY_EXISTS" in again
                err, stored = await _text(
                    c, "ctxstore_ingest", {"text": "The wifi password is swordfish.", "type": "knowledge"}
                )
                assert not err and "queued" in stored

    anyio.run(session)
    logged = errlog.read_text()
    assert "HTTP Request" not in logged and "INFO" not in logged, logged
