"""Every request measured, traced and logged once: latency and status by route template (the metric and the
access log line), a trace span around it, and the request id and organisation in the line.

Outermost middleware of the local app, so refusals answered by admission control are counted too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxstore import observability as obs
from ctxstore.http.context import get_context
from ctxstore.observability.json_log import ACCESS_LOGGER

access = logging.getLogger(ACCESS_LOGGER)
UNMATCHED = "unmatched"  # a path no route serves: never the raw path (unbounded, and it may carry tokens)


def route_template(scope: Scope, routes: Sequence[BaseRoute] = ()) -> str:
    """The matched route's template (`/connectors/{connector_id}`), or the mount's prefix (`/console`).

    A request answered before routing (401, 503 from admission) is matched here against `routes`."""
    route = scope.get("route")
    if route is None:
        route = next((r for r in routes if r.matches(scope)[0] is not Match.NONE), None)
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute] = ()) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless the app starts a response

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        method = str(scope["method"])
        with obs.span(f"{method} request", **{"http.request.method": method}) as span:
            try:
                await self.app(scope, receive, send_status)
            finally:
                self._record(scope, method, status, time.perf_counter() - started, span)

    def _record(self, scope: Scope, method: str, status: int, seconds: float, span: Any) -> None:
        route = route_template(scope, self.routes)
        ctx = get_context(scope)
        org = ctx.principal.org if ctx.principal is not None else None
        obs.observe(obs.REQUEST, seconds, route=route, method=method, status=str(status))
        if span is not None:
            span.update_name(f"{method} {route}")
            span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", status)
            span.set_attribute("ctxstore.request_id", ctx.request_id)
            if org:
                span.set_attribute("ctxstore.org_id", org)
        access.info(
            "%s %s %s",
            method,
            route,
            status,
            extra={
                "request_id": ctx.request_id,
                "method": method,
                "route": route,
                "status": status,
                "latency_ms": round(seconds * 1000, 3),
                "org_id": org,
            },
        )
