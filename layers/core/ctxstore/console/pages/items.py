"""Documents and memories: paginated list with live status, filters, upload, add, inspect, edit, delete."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ctxstore.console import web
from ctxstore.domain import json_limits
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.ingest_request import MAX_FILE_BYTES, Upload, parse_ingest
from ctxstore.domain.scopes import validate_collection_name
from ctxstore.parsing.formats import classify
from ctxstore.services.container import Capabilities

if TYPE_CHECKING:  # the page loads the ingest service only when it accepts something
    from ctxstore.services.items.ingest import IngestAnswer

router = APIRouter()

PAGE_SIZE = 20
STATUSES = ["queued", "processing", "graph_creation", "completed", "errored"]
TERMINAL = {"completed", "errored"}


def inline_max_bytes(capabilities: Capabilities) -> int:
    """The largest file the console sends in its own request; larger ones go to blob storage first (the
    composition root sets the deployment's limit: 4 MiB on AWS, where Lambda caps a request at 6 MB)."""
    limit = capabilities.console_inline_upload_max_bytes
    return min(limit, MAX_FILE_BYTES) if limit > 0 else MAX_FILE_BYTES


def _store(value: str | None) -> str:
    return "memory" if value == "memory" else "knowledge"


def _listing(caller: web.Caller, db: str, q: dict[str, str]) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    if q["status"]:
        filters["source_fields"] = {"indexing_status": q["status"]}
    if q["meta_key"]:
        filters["additional_metadata"] = {q["meta_key"]: q["meta_value"]}
    collection = validate_collection_name(q["collection"])
    data = caller.services.catalog.list_items(
        caller.principal,
        db,
        collection,
        q["type"],
        page=max(1, int(q["page"] or 1)),
        page_size=PAGE_SIZE,
        ids=None,
        filters=filters,
        include_fields=None,
        contains=q["text"],
    )
    live = any(s.get("indexing_status") not in TERMINAL for s in data["sources"])
    untitled = [str(s["id"]) for s in data["sources"] if not s.get("title") and s.get("type") != "file"]
    opening = (
        caller.services.catalog.opening_words(caller.principal, db, collection, q["type"], untitled) if untitled else {}
    )
    return {"rows": data["sources"], "pagination": data["pagination"], "live": live, "opening": opening}


def _query(request: Request) -> dict[str, str]:
    qp = request.query_params
    page = qp.get("page", "1")
    return {
        "collection": qp.get("collection", ""),
        "type": _store(qp.get("type")),
        "status": qp.get("status", "") if qp.get("status", "") in STATUSES else "",
        "meta_key": qp.get("meta_key", "").strip(),
        "meta_value": qp.get("meta_value", "").strip(),
        "text": qp.get("text", "").strip()[:200],
        "page": page if page.isdigit() else "1",
    }


def _qs(q: dict[str, str], **override: Any) -> str:
    from urllib.parse import urlencode

    merged = {**q, **{k: str(v) for k, v in override.items()}}
    return urlencode({k: v for k, v in merged.items() if v})


def _page(request: Request, caller: web.Caller, db: str, status: int = 200, **values: Any) -> Response:
    q = _query(request)
    collections = caller.services.databases.list_collections(caller.principal, db)["collections"]
    return web.render(
        request,
        "items.html",
        caller,
        status=status,
        section="items",
        db=db,
        q=q,
        qs=_qs,
        statuses=STATUSES,
        collections=collections,
        listing=_listing(caller, db, q),
        max_mb=MAX_FILE_BYTES // (1024 * 1024),
        inline_max=inline_max_bytes(caller.services.container.capabilities),
        **values,
    )


@router.get("/databases/{db}/items")
def items_page(db: str, request: Request, caller: web.SignedIn) -> Response:
    return _page(request, caller, db)


@router.get("/databases/{db}/items/rows")
def item_rows(db: str, request: Request, caller: web.SignedIn) -> Response:
    q = _query(request)
    return web.render(request, "partials/item_rows.html", caller, db=db, q=q, qs=_qs, listing=_listing(caller, db, q))


def _accept(caller: web.Caller, db: str, collection: str, store: str, **parts: Any) -> IngestAnswer:
    req = parse_ingest(
        store_raw=store,
        database=db,
        collection=validate_collection_name(collection),
        upsert_raw=None,
        uploads=parts.get("uploads", []),
        document_metadata=parts.get("document_metadata"),
        app_knowledge=parts.get("app_knowledge"),
        memories=parts.get("memories"),
        graph_payload=None,
        classify=classify,
    )
    return caller.services.ingest.accept(caller.principal, req)


@router.post("/databases/{db}/upload")
async def upload(db: str, request: Request, caller: web.Write) -> Response:
    """One file per request, so the page can show each file's own progress (console.js)."""
    form = await request.form()
    f = form.get("file")
    if not isinstance(f, UploadFile):
        return web.problem_json(request, ApiError(ErrorCode.INVALID_PARAMETERS, "send one file as 'file'"))
    if (f.size or 0) > MAX_FILE_BYTES:
        err = ApiError(ErrorCode.PAYLOAD_TOO_LARGE, f"file '{f.filename}' is over the 50 MB limit")
        return web.problem_json(request, err)
    data = Upload(filename=f.filename or "", content_type=f.content_type, data=await f.read())
    try:
        result = await run_in_threadpool(
            _accept, caller, db, web.form_str(form, "collection"), "knowledge", uploads=[data]
        )
    except ApiError as err:
        return web.problem_json(request, err)
    return _accepted(result)


def _accepted(result: IngestAnswer) -> Response:
    """What the page's upload script reads back for one file: its item id and whether it was taken."""
    item = result["results"][0]
    return JSONResponse(
        {
            "id": item["id"],
            "filename": item.get("filename"),
            "status": item["status"],
            "error": item.get("error"),
            "error_code": item.get("error_code"),
        },
        status_code=202,
    )


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = json_limits.loads(await request.body(), "the request body")
    except ValueError:
        raise invalid("send a JSON object") from None
    if not isinstance(body, dict):
        raise invalid("send a JSON object")
    return body


@router.post("/databases/{db}/uploads")
async def upload_grant(db: str, request: Request, caller: web.Write) -> Response:
    """A grant to send one large file straight to blob storage (S3 on AWS), past the request size limit:
    the same grant as POST /context/uploads, then /upload-ref ingests it."""
    try:
        body = await _json_object(request)
        caller.services.databases.require(caller.principal, db)
        wanted = {k: body[k] for k in ("filename", "size_bytes", "content_type") if body.get(k) not in (None, "")}
        grant = await run_in_threadpool(caller.services.ingest.uploads.create, caller.principal, wanted)
    except ApiError as err:
        return web.problem_json(request, err)
    url = str(grant["url"])
    grant["url"] = url if "://" in url else web.api_base(request) + url  # local: this server's /blobs/{token}
    return JSONResponse(grant, status_code=201)


@router.post("/databases/{db}/upload-ref")
async def upload_by_reference(db: str, request: Request, caller: web.Write) -> Response:
    """Ingest a file sent earlier under an upload grant; answers like /upload."""
    svc, p = caller.services, caller.principal
    try:
        body = await _json_object(request)
        upload_id = str(body.get("upload_id") or "")
        ref: dict[str, Any] = {"upload_id": upload_id}
        if body.get("filename"):
            ref["filename"] = body["filename"]
        files = await run_in_threadpool(svc.ingest.uploads.resolve, p, [ref])
        result = await run_in_threadpool(
            _accept, caller, db, str(body.get("collection") or ""), "knowledge", uploads=files
        )
        # The item keeps its own copy; a refused ingest keeps the staged file for another try.
        await run_in_threadpool(svc.ingest.uploads.release, p, [upload_id])
    except ApiError as err:
        return web.problem_json(request, err)
    return _accepted(result)


@router.get("/databases/{db}/status.json")
def status_json(db: str, request: Request, caller: web.SignedIn) -> Response:
    ids = [i for i in request.query_params.get("ids", "").split(",") if i]
    if not ids:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, "'ids' is required")
    collection = validate_collection_name(request.query_params.get("collection", ""))
    data = caller.services.status.lookup(caller.principal, db, collection, ids)
    return JSONResponse(data)


@router.post("/databases/{db}/app-items")
async def add_app_item(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    try:
        item: dict[str, Any] = {
            "title": web.form_str(form, "title"),
            "type": web.form_str(form, "app_type") or "note",
            "content": {"text": web.form_str(form, "text")},
            "additional_metadata": web.json_field(web.form_str(form, "additional_metadata"), "additional metadata"),
        }
        if web.form_str(form, "id"):
            item["id"] = web.form_str(form, "id")
        result = await run_in_threadpool(
            _accept, caller, db, web.form_str(form, "collection"), "knowledge", app_knowledge=json.dumps([item])
        )
    except ApiError as err:
        return _page(request, caller, db, status=err.status, problem=web.Problem.of(request, err), open_form="app")
    return _added(request, caller, db, result)


def parse_pairs(text: str) -> list[dict[str, str]]:
    """'User: …' / 'Assistant: …' lines into user/assistant pairs (a turn may span several lines)."""
    turns: list[tuple[str, str]] = []
    for line in text.splitlines():
        head, _, rest = line.partition(":")
        speaker = head.strip().lower()
        if speaker in ("user", "assistant") and _:
            turns.append((speaker, rest.strip()))
        elif turns and line.strip():
            turns[-1] = (turns[-1][0], turns[-1][1] + "\n" + line.strip())
    pairs: list[dict[str, str]] = []
    for speaker, said in turns:
        if speaker == "user":
            pairs.append({"user": said, "assistant": ""})
        elif pairs and not pairs[-1]["assistant"]:
            pairs[-1]["assistant"] = said
        else:
            pairs.append({"user": "", "assistant": said})
    return pairs


@router.post("/databases/{db}/memories")
async def add_memory(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    memory: dict[str, Any] = {"infer": form.get("infer") == "on"}
    text = web.form_str(form, "text")
    if web.form_str(form, "shape") == "pairs":
        memory["user_assistant_pairs"] = parse_pairs(text)
    else:
        memory["text"] = text
    for name in ("title", "user_name", "id"):
        if web.form_str(form, name):
            memory[name] = web.form_str(form, name)
    try:
        if "user_assistant_pairs" in memory and not memory["user_assistant_pairs"]:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, "write the conversation as 'User: …' and 'Assistant: …' lines")
        result = await run_in_threadpool(
            _accept, caller, db, web.form_str(form, "collection"), "memory", memories=json.dumps([memory])
        )
    except ApiError as err:
        return _page(request, caller, db, status=err.status, problem=web.Problem.of(request, err), open_form="memory")
    return _added(request, caller, db, result)


def _added(request: Request, caller: web.Caller, db: str, result: IngestAnswer) -> Response:
    """Back to the list the form was posted from (its filters are the form's query string)."""
    item = result["results"][0]
    added = {"id": item["id"], "status": item["status"]}
    return web.done(request, caller, f"/databases/{quote(db, safe='')}/items?{request.url.query}", added=added)


# ---- one item -------------------------------------------------------------------------------
def _item(request: Request, caller: web.Caller, db: str, status: int = 200, **values: Any) -> Response:
    qp = request.query_params
    item_id = qp.get("id", "")
    collection = validate_collection_name(qp.get("collection", ""))
    store = _store(qp.get("type"))
    svc, p = caller.services, caller.principal
    api_base = web.api_base(request)

    def url_for(org: str, key: str, expires_in: int, filename: str, content_type: str) -> str:
        url = svc.container.blobs.presigned_url(
            org, key, expires_in=expires_in, filename=filename, content_type=content_type
        )
        return url if "://" in url else api_base + url

    inspected = svc.catalog.inspect(p, db, collection, item_id, mode="both", expiry_seconds=900, url_for=url_for)
    chunks = svc.catalog.chunks(p, db, collection, item_id, store, offset=0, limit=200)
    listed = svc.catalog.list_items(
        p, db, collection, store, page=1, page_size=1, ids=[item_id], filters={}, include_fields=None
    )["sources"]
    row = listed[0] if listed else {}
    label = svc.catalog.opening_words(p, db, collection, store, [item_id]).get(item_id, "")
    return web.render(
        request,
        "item.html",
        caller,
        status=status,
        section="items",
        db=db,
        item_id=item_id,
        collection=collection,
        store=store,
        inspected=inspected,
        chunks=chunks,
        row=row,
        label=inspected.get("title") or label or item_id,
        saved=qp.get("saved") == "1",
        **values,
    )


@router.get("/databases/{db}/item")
def item_page(db: str, request: Request, caller: web.SignedIn) -> Response:
    return _item(request, caller, db)


@router.post("/databases/{db}/item/metadata")
async def edit_metadata(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    qp = request.query_params
    try:
        md = web.json_field(web.form_str(form, "metadata"), "metadata")
        amd = web.json_field(web.form_str(form, "additional_metadata"), "additional metadata")
        caller.services.catalog.update_metadata(
            caller.principal, db, validate_collection_name(qp.get("collection", "")), qp.get("id", ""), md or None, amd
        )
    except ApiError as err:
        return _item(request, caller, db, status=err.status, problem=web.Problem.of(request, err))
    return web.redirect(request, f"/databases/{db}/item?{request.url.query}&saved=1")


@router.post("/databases/{db}/item/delete")
async def delete_item(db: str, request: Request, caller: web.Write) -> Response:
    qp = request.query_params
    collection = validate_collection_name(qp.get("collection", ""))
    store = _store(qp.get("type"))
    caller.services.catalog.delete(caller.principal, db, collection, store, [qp.get("id", "")])
    return web.redirect(request, f"/databases/{db}/items?{_qs({'collection': collection, 'type': store})}")
