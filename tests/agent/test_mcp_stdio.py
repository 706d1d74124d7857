"""`ctxstore mcp` over stdio, as a desktop agent starts it, reaching a real `ctxstore serve` with its key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from tests.agent.conftest import Served


async def _text(c: Client, name: str, args: dict[str, object]) -> tuple[bool, str]:
    result = await c.call_tool(name, args)
    return bool(result.is_error), "\n".join(getattr(b, "text", "") for b in result.content)


def test_stdio_server_reads_env_and_local_files(served: Served, tmp_path: Path) -> None:
    db = served.ready_database("stdio")
    doc = tmp_path / "handbook.md"
    doc.write_text("# Handbook\nNew hires get a green badge on their first day.")
    env = {
        **os.environ,
        "CTXSTORE_URL": served.url,
        "CTXSTORE_API_KEY": served.key,
        "CTXSTORE_DATABASE": db,
        "CTXSTORE_CONFIG": str(tmp_path / "none.json"),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxstore.cli", "mcp"], env=env)

    async def session() -> None:
        async with Client(params) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert len(names) == 12 and "ctxstore_query" in names
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
