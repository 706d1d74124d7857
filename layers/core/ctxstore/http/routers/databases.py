"""/databases (and the legacy /tenants routes, rewritten to these by the middleware)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from ctxstore.domain.errors import invalid
from ctxstore.http import envelope
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope

router = APIRouter(tags=["databases"])


class CreateDatabaseBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    database: str
    database_metadata_schema: list[Any] | None = None
    tenant_metadata_schema: list[Any] | None = None


class SchemaUpdateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    add_fields: list[Any]


class CollectionDeleteBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    database: str | None = None
    collection: str | None = None


@router.post("/databases", status_code=202)
def create_database(body: CreateDatabaseBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    schema: object = body.database_metadata_schema
    field = "database_metadata_schema"
    if body.tenant_metadata_schema is not None:
        ctx.deprecate(
            "tenant_metadata_schema is deprecated; use database_metadata_schema instead.",
            "tenant_metadata_schema",
            "database_metadata_schema",
        )
        if schema is None:
            schema, field = body.tenant_metadata_schema, "tenant_metadata_schema"
    echo_scope(ctx, body.database)
    data = svc.databases.create(caller, body.database, schema, field)
    return envelope.ok(ctx, data, status=202)


@router.get("/databases")
def list_databases(ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, svc.databases.list(caller))


@router.delete("/databases")
def delete_database(ctx: Ctx, caller: Caller, svc: Svc, database: str = Query()) -> JSONResponse:
    echo_scope(ctx, database)
    return envelope.ok(ctx, svc.databases.delete(caller, database))


@router.get("/databases/status")
def database_status(ctx: Ctx, caller: Caller, svc: Svc, database: str = Query()) -> JSONResponse:
    echo_scope(ctx, database)
    return envelope.ok(ctx, svc.databases.status(caller, database))


@router.get("/databases/collections")
def list_collections(ctx: Ctx, caller: Caller, svc: Svc, database: str = Query()) -> JSONResponse:
    echo_scope(ctx, database)
    return envelope.ok(ctx, svc.databases.list_collections(caller, database))


@router.delete("/databases/collections")
def delete_collection(
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    database: str | None = Query(default=None),
    collection: str | None = Query(default=None),
    body: CollectionDeleteBody | None = Body(default=None),
) -> JSONResponse:
    db = database or (body.database if body else None)
    col = collection if collection is not None else (body.collection if body else None)
    if not db:
        raise invalid("'database' is required")
    echo_scope(ctx, db, col or "")
    return envelope.ok(ctx, svc.databases.delete_collection(caller, db, col))


@router.get("/databases/stats")
def database_stats(ctx: Ctx, caller: Caller, svc: Svc, database: str = Query()) -> JSONResponse:
    echo_scope(ctx, database)
    return envelope.ok(ctx, svc.databases.stats(caller, database))


@router.get("/databases/{database}/metadata-schema")
def get_metadata_schema(database: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    echo_scope(ctx, database)
    fields = [f.to_json() for f in svc.databases.schema(caller, database)]
    # `fields` is the reference's name for the list; `database_metadata_schema` the name the create body uses.
    return envelope.ok(
        ctx, {"database": database, "tenant_id": database, "fields": fields, "database_metadata_schema": fields}
    )


@router.patch("/databases/{database}/metadata-schema")
def update_metadata_schema(database: str, body: SchemaUpdateBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    echo_scope(ctx, database)
    return envelope.ok(ctx, svc.databases.update_schema(caller, database, body.add_fields))
