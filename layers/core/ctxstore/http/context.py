"""Per-request state the conventions share: request id, timing, deprecations, scope echo."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Scope

from ctxstore.services.access.principal import Principal

DEPRECATED_SINCE = "2.0.0"


@dataclass
class RequestContext:
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.perf_counter)
    deprecations: list[dict[str, Any]] = field(default_factory=list)
    scope_echo: dict[str, str] = field(default_factory=dict)
    legacy_route: bool = False
    route_family: str = "core"  # core | byog | webhooks | public
    principal: Principal | None = None
    route: tuple[str, str] | None = None  # (method, route template), set once the router matched

    def deprecate(self, message: str, deprecated_field: str | None = None, preferred_field: str | None = None) -> None:
        entry: dict[str, Any] = {"deprecated": True, "message": message, "deprecated_since": DEPRECATED_SINCE}
        if deprecated_field:
            entry["deprecated_field"] = deprecated_field
            entry["preferred_field"] = preferred_field
        if entry not in self.deprecations:
            self.deprecations.append(entry)

    def latency_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)


def get_context(scope: Scope) -> RequestContext:
    state = scope.setdefault("state", {})
    ctx = state.get("ctx")
    if ctx is None:
        ctx = state["ctx"] = RequestContext()
    return ctx  # type: ignore[no-any-return]


# /favicon.ico: browsers ask for it on every console page (console/mount.py serves it).
PUBLIC_PATHS = ("/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/favicon.ico")


def route_family(path: str) -> str:
    if path in PUBLIC_PATHS or path.startswith("/blobs/"):
        return "public"  # /blobs/{token}: the signed token is the credential
    if path == "/console" or path.startswith("/console/"):
        return "public"  # the console checks its own session cookie (console/web.py), never a Bearer key
    if path == "/byog" or path.startswith("/byog/"):
        return "byog"
    if path.startswith("/webhooks/"):
        return "webhooks"
    return "core"
