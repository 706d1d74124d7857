"""Calling ctxstore's MCP tools through a real MCP client session (in-process or over Streamable HTTP)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

ID_RE = re.compile(r"id=([0-9A-Za-z_\-]+)")


class ToolResult:
    def __init__(self, text: str, is_error: bool) -> None:
        self.text = text
        self.is_error = is_error

    @property
    def ids(self) -> list[str]:
        return ID_RE.findall(self.text)

    def __repr__(self) -> str:
        return f"ToolResult(is_error={self.is_error}, text={self.text!r})"


async def _call(client: Client, name: str, args: dict[str, Any]) -> ToolResult:
    result = await client.call_tool(name, args)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    return ToolResult(text, bool(result.is_error))


def in_process(server: MCPServer[Any]) -> Callable[[str, dict[str, Any]], ToolResult]:
    """A `call(name, args)` that opens an in-process client session for each call."""

    def call(name: str, args: dict[str, Any]) -> ToolResult:
        async def run() -> ToolResult:
            async with Client(server) as c:
                return await _call(c, name, args)

        return anyio.run(run)

    return call


def over_http(url: str, headers: dict[str, str], mode: str = "legacy") -> Callable[[str, dict[str, Any]], ToolResult]:
    """A `call(name, args)` over Streamable HTTP: one session (initialize handshake in legacy mode) per call."""

    def call(name: str, args: dict[str, Any]) -> ToolResult:
        async def run() -> ToolResult:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as c,
            ):
                return await _call(c, name, args)

        return anyio.run(run)

    return call
