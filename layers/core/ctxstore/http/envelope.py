"""The response envelope every core route returns, on success and on failure."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from ctxstore import API_VERSION
from ctxstore.http import reference_shape
from ctxstore.http.context import RequestContext


def meta(ctx: RequestContext) -> dict[str, Any]:
    m: dict[str, Any] = {
        "request_id": ctx.request_id,
        "latency_ms": ctx.latency_ms(),
        "api_version": API_VERSION,
    }
    if "database" in ctx.scope_echo:
        m["database"] = ctx.scope_echo["database"]
        m["tenant_id"] = ctx.scope_echo["database"]
    if "collection" in ctx.scope_echo:
        m["collection"] = ctx.scope_echo["collection"]
        m["sub_tenant_id"] = ctx.scope_echo["collection"]
    if "source_type" in ctx.scope_echo:
        m["source_type"] = ctx.scope_echo["source_type"]
    if ctx.deprecations:
        m["deprecation"] = list(ctx.deprecations)
    return m


def ok(ctx: RequestContext, data: Any, status: int = 200) -> JSONResponse:
    body: dict[str, Any] = {"success": True, "data": data, "error": None, "meta": meta(ctx)}
    if reference_shape.answers_bare(ctx.route):
        body = reference_shape.both_readers(body)
    return JSONResponse(body, status_code=status)


def failure_body(ctx: RequestContext, code: str, message: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "success": False,
        "data": None,
        "error": {"code": code, "message": message},
        "meta": meta(ctx),
    }
    detail: dict[str, Any] | None = None
    if ctx.route_family == "byog":
        detail = {"success": False, "error_code": code, "message": message}
    if ctx.deprecations:
        first = next((d for d in ctx.deprecations if d.get("deprecated_field")), ctx.deprecations[0])
        detail = detail or {"success": False, "error_code": code, "message": message}
        detail.update(
            deprecated=True,
            deprecated_field=first.get("deprecated_field"),
            preferred_field=first.get("preferred_field"),
        )
    if detail is not None:
        body["detail"] = detail
    return body
