"""/byog: hosted openCypher graphs (databases, collections, queries).

Bodies are read here, not by FastAPI, so the 256 KiB limit is checked on the raw
bytes before any parsing. Failures carry the mirrored `detail` and bad keys answer
403; both are done for the whole /byog family by the envelope and the middleware.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from ctxstore.domain import json_limits
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.http import envelope
from ctxstore.http.context import RequestContext
from ctxstore.http.deps import Caller, Ctx, Svc
from ctxstore.services.byog.service import MAX_BODY_BYTES, ByogService
from ctxstore.services.registry import Services

router = APIRouter(prefix="/byog", tags=["byog"])

T = TypeVar("T")


def _schema(required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object", "required": required, "properties": props}}},
        }
    }


_STR = {"type": "string"}
DB_BODY = _schema(["database"], {"database": _STR})
COL_BODY = _schema(["database", "collection"], {"database": _STR, "collection": _STR})
QUERY_BODY = _schema(
    ["database", "collection", "query"],
    {
        "database": _STR,
        "collection": _STR,
        "query": {"type": "string", "description": "openCypher; pass caller data through params"},
        "params": {"type": "object", "additionalProperties": True},
    },
)


async def read_body(request: Request) -> dict[str, Any]:
    """The JSON object body, or 413 past 256 KiB (counted on the bytes the client sent)."""
    state = request.scope.get("state") or {}
    if int(state.get("raw_body_size", 0)) > MAX_BODY_BYTES:
        raise _too_large()
    parsed = state.get("json_body")
    if isinstance(parsed, dict):  # the middleware parsed it already (a JSON object body, within limits)
        return parsed
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        data = json_limits.loads(raw, "the request body")
    except ValueError:
        raise invalid("malformed request body: expected a JSON object") from None
    if not isinstance(data, dict):
        raise invalid("malformed request body: expected a JSON object")
    return data


def _too_large() -> ApiError:
    return ApiError(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"request body over {MAX_BODY_BYTES // 1024} KiB; send large data in several queries (UNWIND $rows batches)",
    )


def _svc(svc: Services) -> ByogService:
    if svc.byog is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "BYOG is not configured on this deployment")
    return svc.byog


def _echo(ctx: RequestContext, database: object, collection: object = None) -> None:
    if isinstance(database, str):
        ctx.scope_echo["database"] = database
    if isinstance(collection, str):
        ctx.scope_echo["collection"] = collection


async def _run(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


@router.post("/databases", openapi_extra=DB_BODY)
async def create_database(request: Request, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    body = await read_body(request)
    _echo(ctx, body.get("database"))
    byog = _svc(svc)
    data = await _run(lambda: byog.create_database(caller, body.get("database")))
    return envelope.ok(ctx, data)


@router.post("/query", openapi_extra=QUERY_BODY)
async def query(request: Request, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    body = await read_body(request)
    _echo(ctx, body.get("database"), body.get("collection"))
    byog = _svc(svc)
    rows = await _run(
        lambda: byog.query(caller, body.get("database"), body.get("collection"), body.get("query"), body.get("params"))
    )
    return envelope.ok(ctx, rows)


@router.get("/collections")
async def list_collections(ctx: Ctx, caller: Caller, svc: Svc, database: str = Query()) -> JSONResponse:
    _echo(ctx, database)
    byog = _svc(svc)
    return envelope.ok(ctx, await _run(lambda: byog.list_collections(caller, database)))


@router.delete("/collections", openapi_extra=COL_BODY)
async def delete_collection(
    request: Request,
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    database: str | None = Query(default=None),
    collection: str | None = Query(default=None),
) -> JSONResponse:
    body = await read_body(request)
    db = body.get("database", database)
    col = body.get("collection", collection)
    _echo(ctx, db, col)
    byog = _svc(svc)
    return envelope.ok(ctx, await _run(lambda: byog.delete_collection(caller, db, col)))


@router.delete("/databases", openapi_extra=DB_BODY)
async def delete_database(
    request: Request, ctx: Ctx, caller: Caller, svc: Svc, database: str | None = Query(default=None)
) -> JSONResponse:
    body = await read_body(request)
    db = body.get("database", database)
    _echo(ctx, db)
    byog = _svc(svc)
    return envelope.ok(ctx, await _run(lambda: byog.delete_database(caller, db)))
