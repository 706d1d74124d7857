"""The console, mounted at /console on the local server and built on its first request.

Its pages, templates and form parsing cost about a second of imports; a restarting server answers its first
query without waiting for them (bench/ops/restart.py). The first console page pays it once, off the event loop.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ctxstore.services.registry import Services

PREFIX = "/console"
FAVICON = Path(__file__).resolve().parent / "static" / "favicon.ico"


async def favicon() -> FileResponse:
    """Browsers ask for /favicon.ico whatever the page says: a real icon, not a 404 in the console's log."""
    return FileResponse(FAVICON, media_type="image/x-icon", headers={"Cache-Control": "public, max-age=86400"})


class LazyConsole:
    """An ASGI app that builds the console app once, when the first request reaches it."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._app: ASGIApp | None = None
        self._lock = threading.Lock()

    def _build(self) -> ASGIApp:
        with self._lock:
            if self._app is None:
                from ctxstore.console.mount import build_console

                self._app = build_console(self._services)
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is None:
            app = await anyio.to_thread.run_sync(self._build)
        await app(scope, receive, send)


def mount(app: FastAPI, services: Services) -> None:
    app.add_api_route("/favicon.ico", favicon, methods=["GET"], include_in_schema=False)
    app.mount(PREFIX, LazyConsole(services))
