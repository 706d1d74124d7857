"""Databases and collections: create with progress until ready, readiness, stats, schema, deletes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ctxstore.console import web
from ctxstore.domain.errors import ApiError
from ctxstore.domain.metadata_schema import DataType

router = APIRouter()

READINESS = [
    ("scheduler_status", "Scheduler"),
    ("graph_status", "Graph"),
    ("vectorstore_status.knowledge", "Knowledge store"),
    ("vectorstore_status.memories", "Memory store"),
]


def readiness(status: Mapping[str, Any]) -> dict[str, Any]:
    """The four infra flags of GET /databases/status, flattened for the page."""
    infra = status.get("infra") or {}
    flags = []
    for path, label in READINESS:
        value: Any = infra
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        flags.append({"label": label, "ready": bool(value)})
    return {"flags": flags, "ready": all(f["ready"] for f in flags), "status": status.get("status")}


def collection_label(name: str) -> str:
    return name or "(default)"


@router.get("/databases")
def list_page(request: Request, caller: web.SignedIn) -> Response:
    return _list(request, caller)


SUMMARISED_DATABASES = 50  # past this many, the list shows names only (each summary reads every item record)


def summary(caller: web.Caller, db: str) -> dict[str, Any] | None:
    """Items (knowledge and memories, every collection) and the newest item's time; None when unreadable
    (a database still provisioning, or being deleted)."""
    svc, p = caller.services, caller.principal
    try:
        collections = svc.databases.list_collections(p, db)["collections"]
        total, newest = 0, ""
        for collection in dict.fromkeys(["", *collections]):
            for store in ("knowledge", "memory"):
                page = svc.catalog.list_items(
                    p, db, collection, store, page=1, page_size=1, ids=None, filters={}, include_fields=None
                )
                total += int(page["pagination"]["total"])
                if page["sources"]:
                    newest = max(newest, str(page["sources"][0]["created_at"]))
    except ApiError:
        return None
    return {"items": total, "last_activity": newest}


def _list(request: Request, caller: web.Caller, status: int = 200, **values: Any) -> Response:
    listing = caller.services.databases.list(caller.principal)
    names = listing["databases"]
    summaries = {d: summary(caller, d) for d in names[:SUMMARISED_DATABASES]}
    return web.render(
        request,
        "databases.html",
        caller,
        status=status,
        section="databases",
        databases=names,
        summaries=summaries,
        failed=listing["failed_databases"],
        data_types=[t.value for t in DataType],
        **values,
    )


@router.post("/databases")
async def create(request: Request, caller: web.Write) -> Response:
    form = await request.form()
    name = web.form_str(form, "database")
    try:
        caller.services.databases.create(caller.principal, name, None, "database_metadata_schema")
    except ApiError as err:
        return _list(request, caller, status=err.status, problem=web.Problem.of(request, err), typed_name=name)
    return web.redirect(request, f"/databases/{name}?created=1")


def _overview(request: Request, caller: web.Caller, db: str, status: int = 200, **values: Any) -> Response:
    svc, p = caller.services, caller.principal
    state = readiness(svc.databases.status(p, db))
    collections = svc.databases.list_collections(p, db)["collections"]
    stats = svc.databases.stats(p, db)
    schema = [f.to_json() for f in svc.databases.schema(p, db)]
    return web.render(
        request,
        "database.html",
        caller,
        status=status,
        section="overview",
        db=db,
        state=state,
        collections=[{"name": c, "label": collection_label(c)} for c in collections],
        stats={
            "knowledge": stats["knowledge_collection"]["row_count"],
            "memory": stats["memory_collection"]["row_count"],
        },
        schema=schema,
        data_types=[t.value for t in DataType],
        created=request.query_params.get("created") == "1",
        **values,
    )


@router.get("/databases/{db}")
def overview(db: str, request: Request, caller: web.SignedIn) -> Response:
    return _overview(request, caller, db)


@router.get("/databases/{db}/readiness")
def readiness_partial(db: str, request: Request, caller: web.SignedIn) -> Response:
    state = readiness(caller.services.databases.status(caller.principal, db))
    return web.render(request, "partials/readiness.html", caller, db=db, state=state)


@router.post("/databases/{db}/schema")
async def add_field(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    field: dict[str, Any] = {
        "name": web.form_str(form, "name"),
        "data_type": web.form_str(form, "data_type"),
        "enable_match": form.get("enable_match") == "on",
    }
    if field["data_type"] == "VARCHAR" and web.form_str(form, "max_length"):
        try:
            field["max_length"] = int(web.form_str(form, "max_length"))
        except ValueError:
            field["max_length"] = web.form_str(form, "max_length")
    try:
        caller.services.databases.update_schema(caller.principal, db, [field])
    except ApiError as err:
        return _overview(request, caller, db, status=err.status, problem=web.Problem.of(request, err))
    return web.redirect(request, f"/databases/{db}#schema")


@router.post("/databases/{db}/collections/delete")
async def delete_collection(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    collection = web.form_str(form, "collection")
    err = web.typed_mismatch(form, collection_label(collection), "deleting this collection")
    if err is not None:
        return _overview(request, caller, db, status=400, problem=web.Problem.of(request, err))
    caller.services.databases.delete_collection(caller.principal, db, collection)
    return web.done(request, caller, f"/databases/{quote(db, safe='')}", deleted=collection_label(collection))


@router.post("/databases/{db}/delete")
async def delete_database(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    err = web.typed_mismatch(form, db, "deleting the database")
    if err is not None:
        return _overview(request, caller, db, status=400, problem=web.Problem.of(request, err))
    caller.services.databases.delete(caller.principal, db)
    return web.done(request, caller, "/databases", deleted=db)
