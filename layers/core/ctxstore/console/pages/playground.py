"""Query playground: every POST /query field, ranked chunks with highlights, sources, graph context."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ctxstore.console import snippets, web
from ctxstore.domain.errors import ApiError, ErrorCode

router = APIRouter()

DEFAULTS = {
    "query": "",
    "type": "knowledge",
    "mode": "auto",
    "query_by": "hybrid",
    "operator": "or",
    "alpha": "auto",
    "collection": "",
    "collections": "",
    "max_results": "10",
    "metadata_filters": "",
    "graph_context": "on",
    "recency_bias": "",
    "query_apps": "",
}


def parse_collections(text: str) -> list[str] | dict[str, float] | None:
    """'a, b' is a list; 'a:2, b:0.5' an object of weights."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        return None
    if any(":" in p for p in parts):
        weights: dict[str, float] = {}
        for p in parts:
            name, _, w = p.partition(":")
            try:
                weights[name.strip()] = float(w) if w.strip() else 1.0
            except ValueError:
                raise ApiError(ErrorCode.INVALID_INPUT, f"weight of '{name.strip()}' is not a number") from None
        return weights
    return parts


def build_body(db: str, f: dict[str, str]) -> dict[str, Any]:
    """The POST /query body the form describes (only the fields that differ from the defaults, plus scope)."""
    body: dict[str, Any] = {"database": db, "query": f["query"]}
    for name in ("type", "mode", "query_by", "operator"):
        if f[name] != DEFAULTS[name]:
            body[name] = f[name]
    cols = parse_collections(f["collections"])
    if cols is not None:
        body["collections"] = cols
    elif f["collection"]:
        body["collection"] = f["collection"]
    if f["alpha"] and f["alpha"] != "auto":
        body["alpha"] = _number(f["alpha"], "alpha")
    if f["max_results"] and f["max_results"] != DEFAULTS["max_results"]:
        body["max_results"] = int(_number(f["max_results"], "max_results"))
    if f["recency_bias"]:
        body["recency_bias"] = _number(f["recency_bias"], "recency_bias")
    if f["metadata_filters"].strip():
        body["metadata_filters"] = web.json_field(f["metadata_filters"], "metadata_filters")
    if f["graph_context"] != "on":
        body["graph_context"] = False
    if f["query_apps"] == "on":
        body["query_apps"] = True
    return body


def _number(raw: str, name: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ApiError(ErrorCode.INVALID_INPUT, f"'{name}' must be a number") from None


BASIC = ("query", "type", "mode")  # always shown; the others fold away so results stay in view


def _page(request: Request, caller: web.Caller, db: str, f: dict[str, str], **values: Any) -> Response:
    collections = caller.services.databases.list_collections(caller.principal, db)["collections"]
    # The folded options open by themselves when one of them is set (a query run without htmx comes back).
    advanced = any(f.get(k, v) != v for k, v in DEFAULTS.items() if k not in BASIC)
    return web.render(
        request,
        "playground.html",
        caller,
        section="playground",
        db=db,
        f=f,
        collections=collections,
        advanced=advanced,
        **values,
    )


@router.get("/databases/{db}/playground")
def playground(db: str, request: Request, caller: web.SignedIn) -> Response:
    caller.services.databases.require(caller.principal, db)
    return _page(request, caller, db, dict(DEFAULTS))


@router.post("/databases/{db}/playground")
async def run_query(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    f = {k: web.form_str(form, k, "") for k in DEFAULTS}
    values: dict[str, Any] = {}
    try:
        if caller.services.query is None:
            raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "query is not configured on this deployment")
        body = build_body(db, f)
        started = time.perf_counter()
        data = await run_in_threadpool(caller.services.query.query, caller.principal, dict(body))
        latency_ms = round((time.perf_counter() - started) * 1000, 1)
        api_base = web.api_base(request)
        terms = snippets.query_terms(f["query"])
        gc = data.get("graph_context")
        groups = [t for g in gc["chunk_relations"] + gc["query_paths"] for t in g["triplets"]] if gc else []
        values = {
            "data": data,
            "body": body,
            "latency_ms": latency_ms,
            "chunks": [{**c, "highlighted": snippets.highlight(c["chunk_content"], terms)} for c in data["chunks"]],
            "curl": snippets.as_curl(api_base, "/query", body),
            "python": snippets.as_python(api_base, "/query", body),
            "graph_elements": snippets.relation_elements(
                [{"source": t["source"], "target": t["target"], "relations": [t["relation"]]} for t in groups]
            ),
        }
    except ApiError as err:
        values = {"problem": web.Problem.of(request, err)}
    if web.is_htmx(request):
        return web.render(request, "partials/query_results.html", caller, db=db, f=f, **values)
    return _page(request, caller, db, f, **values)
