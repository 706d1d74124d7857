"""Graphs of one database: a collection's or an item's relations, and an item's subgraph."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ctxstore.console import snippets, web
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.graph_keys import parse_principals
from ctxstore.domain.scopes import validate_collection_name
from ctxstore.services.graphs.service import GraphService

router = APIRouter()


def _params(request: Request) -> dict[str, str]:
    qp = request.query_params
    return {
        "view": "subgraph" if qp.get("view") == "subgraph" else "relations",
        "collection": qp.get("collection", ""),
        "type": "memory" if qp.get("type") == "memory" else "knowledge",
        "id": qp.get("id", ""),
        "depth": qp.get("depth", "2"),
        "max_sources": qp.get("max_sources", "200"),
        "acl": qp.get("acl", ""),
        "limit": qp.get("limit", "300"),
    }


def _graphs(caller: web.Caller) -> GraphService:
    if caller.services.graphs is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "graphs are not configured on this deployment")
    return caller.services.graphs


def graph_data(caller: web.Caller, db: str, g: dict[str, str]) -> dict[str, Any]:
    graphs, p = _graphs(caller), caller.principal
    collection = validate_collection_name(g["collection"])
    acl = parse_principals([g["acl"]]) if g["acl"] else None
    if g["view"] == "subgraph":
        if not g["id"]:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, "the item subgraph needs an item id")
        data = graphs.subgraph(
            p,
            db,
            collection,
            g["type"],
            g["id"],
            depth_raw=g["depth"],
            max_sources_raw=g["max_sources"],
            principals=acl,
        )
        return {
            "elements": snippets.subgraph_elements(data),
            "truncated": data.get("is_truncated"),
            "summary": f"{len(data.get('sources', []))} items, depth reached {data.get('max_depth_reached', 0)}",
        }
    found = graphs.relations(
        p,
        db,
        collection,
        g["type"],
        item_id=g["id"] or None,
        limit_raw=g["limit"],
        cursor_raw=None,
        principals=acl,
    )
    groups = found["relations"]
    mentions = found["auxiliary_relations"]  # with an id: the entities the item mentions
    summary = f"{len(groups)} relation groups" + (f", {len(mentions)} mentioned entities" if mentions else "")
    return {
        "elements": snippets.relation_elements(groups + mentions),
        "truncated": found["is_truncated"] or found["auxiliary_truncated"],
        "summary": summary,
    }


@router.get("/databases/{db}/graph")
def graph_page(db: str, request: Request, caller: web.SignedIn) -> Response:
    caller.services.databases.require(caller.principal, db)
    g = _params(request)
    collections = caller.services.databases.list_collections(caller.principal, db)["collections"]
    return web.render(request, "graph.html", caller, section="graph", db=db, g=g, collections=collections)


@router.get("/databases/{db}/graph.json")
def graph_json(db: str, request: Request, caller: web.SignedIn) -> Response:
    return JSONResponse(graph_data(caller, db, _params(request)))
