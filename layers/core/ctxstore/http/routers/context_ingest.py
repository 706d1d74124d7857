"""POST /context/ingest, POST /context/uploads (large files by reference) and GET /context/status."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ctxstore.domain import json_limits
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.ingest_request import MAX_FILE_BYTES, Upload, parse_ingest
from ctxstore.domain.scopes import validate_collection_name, validate_database_name
from ctxstore.http import envelope
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope
from ctxstore.http.forms import scoped_form
from ctxstore.parsing.formats import classify

router = APIRouter(tags=["context"])

_FORM_FIELDS = frozenset(
    {
        "type",
        "database",
        "collection",
        "upsert",
        "documents",
        "document_metadata",
        "app_knowledge",
        "graph_payload",
        "memories",
        "uploads",
    }
)


def _text(form_value: object, name: str) -> str | None:
    if form_value is None:
        return None
    if isinstance(form_value, UploadFile):
        raise invalid(f"'{name}' must be a form field, not a file")
    return str(form_value)


@router.post("/context/ingest", status_code=202)
async def ingest(request: Request, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        raise invalid("send the ingest request as multipart/form-data")
    form = await scoped_form(request)
    unknown = sorted(set(form.keys()) - _FORM_FIELDS)
    if unknown:
        raise invalid(f"unknown form field '{unknown[0]}'")
    database = validate_database_name(_text(form.get("database"), "database"))
    collection = validate_collection_name(_text(form.get("collection"), "collection"))
    echo_scope(ctx, database, collection)
    files = form.getlist("documents")
    uploads: list[Upload] = []
    for f in files:  # the size check comes first: one file over the limit rejects the whole request
        if not isinstance(f, UploadFile):
            raise invalid("'documents' must be file parts")
        size = f.size if f.size is not None else 0
        if size > MAX_FILE_BYTES:
            raise ApiError(
                ErrorCode.PAYLOAD_TOO_LARGE, f"file '{f.filename}' is {size} bytes; the limit is 50 MB per file"
            )
    for f in files:
        assert isinstance(f, UploadFile)
        uploads.append(Upload(filename=f.filename or "", content_type=f.content_type, data=await f.read()))
    refs = _upload_refs(_text(form.get("uploads"), "uploads"))
    if refs:  # files sent earlier to POST /context/uploads' URL: after the file parts, in the order listed
        uploads.extend(await run_in_threadpool(svc.ingest.uploads.resolve, caller, refs))
    req = parse_ingest(
        store_raw=_text(form.get("type"), "type"),
        database=database,
        collection=collection,
        upsert_raw=_text(form.get("upsert"), "upsert"),
        uploads=uploads,
        document_metadata=_text(form.get("document_metadata"), "document_metadata"),
        app_knowledge=_text(form.get("app_knowledge"), "app_knowledge"),
        memories=_text(form.get("memories"), "memories"),
        graph_payload=_text(form.get("graph_payload"), "graph_payload"),
        classify=classify,
    )
    ctx.scope_echo["source_type"] = "memory" if req.store == "memory" else "file"
    data = await run_in_threadpool(svc.ingest.accept, caller, req)
    if refs:  # each item now has its own copy; a failed request keeps the staged files for a retry
        await run_in_threadpool(svc.ingest.uploads.release, caller, [r["upload_id"] for r in refs])
    return envelope.ok(ctx, data, status=202)


def _upload_refs(raw: str | None) -> list[Any]:
    if raw is None or raw == "":
        return []
    try:
        value = json_limits.loads(raw, "'uploads'")
    except json.JSONDecodeError as exc:
        raise invalid(f"'uploads' must be a JSON-encoded array string: {exc.msg}") from None
    if not isinstance(value, list):
        raise invalid("'uploads' must be a JSON-encoded array of {upload_id, filename} objects")
    return value


@router.post("/context/uploads", status_code=201)
async def create_upload(request: Request, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    """An extension to the spec: a presigned upload for files too large for one request on AWS (docs/api.md)."""
    try:
        body = json_limits.loads(await request.body(), "the request body")
    except ValueError:
        raise invalid("send a JSON object: {filename, size_bytes?, content_type?}") from None
    if not isinstance(body, dict):
        raise invalid("send a JSON object: {filename, size_bytes?, content_type?}")
    data = await run_in_threadpool(svc.ingest.uploads.create, caller, body)
    return envelope.ok(ctx, data, status=201)


@router.get("/context/status")
def status(
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    database: str = Query(),
    collection: str | None = Query(default=None),
    ids: list[str] | None = Query(default=None),
    id: str | None = Query(default=None),
) -> JSONResponse:
    collection = validate_collection_name(collection)
    echo_scope(ctx, database, collection)
    wanted: list[str] = []
    for raw in [*(ids or []), *([id] if id else [])]:
        wanted.extend(part for part in raw.split(",") if part)
    if not wanted:
        raise invalid("'ids' is required: one or more comma-separated item ids")
    return envelope.ok(ctx, svc.status.lookup(caller, database, collection, list(dict.fromkeys(wanted))))
