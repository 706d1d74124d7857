"""BYOG: graph databases, their collections, and a Cypher editor with parameters."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ctxstore.console import snippets, web
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.byog.service import ByogService

router = APIRouter()

QUERY_REFUSED = "The graph database refused this query."
EXAMPLE = "MERGE (a:Person {name: $name})-[r:WORKS_AT]->(c:Company {name: 'Acme'})\nRETURN a, r, c"


def _byog(caller: web.Caller) -> ByogService:
    if caller.services.byog is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "BYOG is not configured on this deployment")
    return caller.services.byog


def _list(request: Request, caller: web.Caller, status: int = 200, **values: Any) -> Response:
    dbs = _byog(caller).list_databases(caller.principal)
    return web.render(request, "byog.html", caller, status=status, section="byog", databases=dbs, **values)


@router.get("/byog")
def byog_page(request: Request, caller: web.SignedIn) -> Response:
    return _list(request, caller)


@router.post("/byog")
async def create_database(request: Request, caller: web.Write) -> Response:
    name = web.form_str(await request.form(), "database")
    try:
        _byog(caller).create_database(caller.principal, name)
    except ApiError as err:
        return _list(request, caller, status=err.status, problem=web.Problem.of(request, err), typed_name=name)
    return web.redirect(request, f"/byog/{name}")


def _editor(request: Request, caller: web.Caller, db: str, status: int = 200, **values: Any) -> Response:
    cols = _byog(caller).list_collections(caller.principal, db)["collections"]
    values.setdefault(
        "form", {"collection": cols[0] if cols else "main", "query": EXAMPLE, "params": '{"name": "Ada"}'}
    )
    return web.render(
        request, "byog_db.html", caller, status=status, section="byog", gdb=db, collections=cols, **values
    )


@router.get("/byog/{db}")
def byog_database(db: str, request: Request, caller: web.SignedIn) -> Response:
    return _editor(request, caller, db)


@router.get("/byog/{db}/query")
def query_address(db: str, request: Request, caller: web.SignedIn) -> Response:
    """The address bar after a query run without htmx (its rows are that answer's): opening it shows the editor."""
    return web.redirect(request, f"/byog/{quote(db, safe='')}")


@router.post("/byog/{db}/query")
async def run_cypher(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    f = {k: web.form_str(form, k) for k in ("collection", "query", "params")}
    values: dict[str, Any] = {"form": f}
    try:
        params = web.json_field(f["params"], "params")
    except ApiError as err:
        values.update(problem=web.Problem.of(request, err), ran=True)
    else:
        try:
            rows = await run_in_threadpool(
                _byog(caller).query, caller.principal, db, f["collection"], f["query"], params
            )
            columns = list(dict.fromkeys(k for r in rows for k in r))
            values.update(rows=rows, columns=columns, elements=snippets.byog_elements(rows), ran=True)
        except ApiError as err:
            values.update(problem=web.Problem.of(request, err, refused=QUERY_REFUSED), ran=True)
    if web.is_htmx(request):  # the rows, and the collections list again (a write may have created one)
        cols = _byog(caller).list_collections(caller.principal, db)["collections"]
        return web.render(request, "partials/byog_results.html", caller, gdb=db, collections=cols, oob=True, **values)
    return _editor(request, caller, db, **values)


@router.post("/byog/{db}/collections/delete")
async def delete_collection(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    collection = web.form_str(form, "collection")
    err = web.typed_mismatch(form, collection, "dropping this graph")
    if err is not None:
        return _editor(request, caller, db, status=400, problem=web.Problem.of(request, err))
    _byog(caller).delete_collection(caller.principal, db, collection)
    return web.done(request, caller, f"/byog/{quote(db, safe='')}", dropped=collection)


@router.post("/byog/{db}/delete")
async def delete_database(db: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    err = web.typed_mismatch(form, db, "deleting this graph database")
    if err is not None:
        return _editor(request, caller, db, status=400, problem=web.Problem.of(request, err))
    _byog(caller).delete_database(caller.principal, db)
    return web.done(request, caller, "/byog", deleted=db)
