"""Items after ingest: POST /context/list, GET /context/inspect, GET /context/chunks, DELETE /context,
PATCH /context/{id}/metadata."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.scopes import validate_collection_name
from ctxstore.http import envelope
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope

router = APIRouter(tags=["context"])


class ListBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    database: str
    collection: str | None = None
    type: str = "knowledge"
    page: int = 1
    page_size: int = 50
    ids: list[str] | None = None
    filters: dict[str, Any] | None = None
    include_fields: list[str] | None = None


class DeleteBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    database: str
    collection: str | None = None
    type: str = "knowledge"
    ids: list[str]


class MetadataBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    database: str
    collection: str | None = None
    database_metadata: dict[str, Any] | None = None
    tenant_metadata: dict[str, Any] | None = None
    additional_metadata: dict[str, Any] | None = None
    document_metadata: Any = None


def _store(value: str) -> str:
    if value not in ("knowledge", "memory"):
        raise invalid(f"'type' must be 'knowledge' or 'memory', not '{value}'")
    return value


@router.post("/context/list")
def list_sources(body: ListBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    collection = validate_collection_name(body.collection)
    echo_scope(ctx, body.database, collection)
    data = svc.catalog.list_items(
        caller,
        body.database,
        collection,
        _store(body.type),
        page=body.page,
        page_size=body.page_size,
        ids=body.ids,
        filters=body.filters or {},
        include_fields=body.include_fields,
    )
    return envelope.ok(ctx, data)


@router.get("/context/inspect")
def inspect(
    request: Request,
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    id: str = Query(),
    database: str = Query(),
    collection: str | None = Query(default=None),
    mode: str = Query(default="both"),
    expiry_seconds: int = Query(default=3600),
) -> JSONResponse:
    collection = validate_collection_name(collection)
    echo_scope(ctx, database, collection)
    blobs = svc.container.blobs

    def url_for(org: str, key: str, expires_in: int, filename: str, content_type: str) -> str:
        url = blobs.presigned_url(org, key, expires_in=expires_in, filename=filename, content_type=content_type)
        return url if "://" in url else str(request.base_url).rstrip("/") + url

    data = svc.catalog.inspect(
        caller, database, collection, id, mode=mode, expiry_seconds=expiry_seconds, url_for=url_for
    )
    return envelope.ok(ctx, data)


@router.get("/context/chunks")
def chunks(
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    id: str = Query(),
    database: str = Query(),
    collection: str | None = Query(default=None),
    type: str | None = Query(default=None),
    offset: int = Query(default=0),
    limit: int = Query(default=100),
) -> JSONResponse:
    collection = validate_collection_name(collection)
    echo_scope(ctx, database, collection)
    data = svc.catalog.chunks(
        caller, database, collection, id, _store(type) if type else None, offset=offset, limit=limit
    )
    return envelope.ok(ctx, data)


@router.delete("/context")
def delete_sources(
    body: DeleteBody,
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    delete_status: str | None = Header(default=None, alias="X-HydraDB-Delete-Status"),
) -> JSONResponse:
    """The reference's `X-HydraDB-Delete-Status: strict` makes an id that was not there a 404; the default
    (`legacy`) answers 200 with per-id `results` whatever happened."""
    mode = (delete_status or "legacy").strip().lower()
    if mode not in ("strict", "legacy"):
        raise invalid("X-HydraDB-Delete-Status must be 'strict' or 'legacy'")
    collection = validate_collection_name(body.collection)
    echo_scope(ctx, body.database, collection)
    data = svc.catalog.delete(caller, body.database, collection, _store(body.type), body.ids)
    missing = [r["id"] for r in data["results"] if not r["deleted"]]
    if mode == "strict" and missing:
        raise ApiError(
            ErrorCode.SOURCE_NOT_FOUND,
            f"{data['deleted_count']} deleted; not found in this database and collection: {', '.join(missing)}",
        )
    return envelope.ok(ctx, data)


@router.patch("/context/{item_id}/metadata")
def update_metadata(item_id: str, body: MetadataBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    if body.document_metadata is not None:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, "document_metadata is not accepted; use additional_metadata")
    if body.collection is None:
        raise invalid("'collection' is required (send an empty string for the default collection)")
    collection = validate_collection_name(body.collection)
    md = body.database_metadata
    if body.tenant_metadata is not None:
        ctx.deprecate(
            "tenant_metadata is deprecated; use database_metadata instead.", "tenant_metadata", "database_metadata"
        )
        md = md if md is not None else body.tenant_metadata
    echo_scope(ctx, body.database, collection)
    data = svc.catalog.update_metadata(caller, body.database, collection, item_id, md, body.additional_metadata)
    return envelope.ok(ctx, data)
