"""Graph reads: GET /context/relations, GET /context/{id}/subgraph, GET /context/subgraph?id=."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.graph_keys import parse_principals
from ctxstore.domain.scopes import validate_collection_name
from ctxstore.http import envelope
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope
from ctxstore.services.graphs.service import GraphService
from ctxstore.services.registry import Services

router = APIRouter(tags=["context"])


def _store(value: str) -> str:
    if value not in ("knowledge", "memory"):
        raise invalid(f"'type' must be 'knowledge' or 'memory', not '{value}'")
    return value


def _graphs(svc: Services) -> GraphService:
    if svc.graphs is None:
        # Not a retryable outage: the deployment has no graph store (403, as for a plan limit).
        raise ApiError(
            ErrorCode.FORBIDDEN,
            "graphs are off on this deployment: it has no graph store (on AWS the stack's GraphStore parameter is "
            "'none'; deploy with GraphStore=neptune-analytics to turn relations and subgraphs on, docs/aws.md)",
        )
    return svc.graphs


@router.get("/context/relations")
def relations(
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    database: str = Query(),
    collection: str | None = Query(default=None),
    id: str | None = Query(default=None),
    type: str = Query(default="knowledge"),
    limit: str | None = Query(default=None),
    cursor: str | None = Query(default=None),
    acl: list[str] | None = Query(default=None),
) -> JSONResponse:
    collection = validate_collection_name(collection)
    echo_scope(ctx, database, collection)
    data = _graphs(svc).relations(
        caller,
        database,
        collection,
        _store(type),
        item_id=id,
        limit_raw=limit,
        cursor_raw=cursor,
        principals=parse_principals(acl),
    )
    return envelope.ok(ctx, data)


def _subgraph(
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    item_id: str,
    database: str,
    collection: str | None,
    type: str,
    depth: str | None,
    max_sources: str | None,
    acl: list[str] | None,
) -> JSONResponse:
    collection = validate_collection_name(collection)
    echo_scope(ctx, database, collection)
    data = _graphs(svc).subgraph(
        caller,
        database,
        collection,
        _store(type),
        item_id,
        depth_raw=depth,
        max_sources_raw=max_sources,
        principals=parse_principals(acl),
    )
    return envelope.ok(ctx, data)


@router.get("/context/subgraph")
def subgraph_by_query(
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    id: str = Query(),
    database: str = Query(),
    collection: str | None = Query(default=None),
    type: str = Query(default="knowledge"),
    depth: str | None = Query(default=None),
    max_sources: str | None = Query(default=None),
    acl: list[str] | None = Query(default=None),
) -> JSONResponse:
    """The form for ids that contain a slash."""
    return _subgraph(ctx, caller, svc, id, database, collection, type, depth, max_sources, acl)


@router.get("/context/{item_id}/subgraph")
def subgraph_by_path(
    item_id: str,
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    database: str = Query(),
    collection: str | None = Query(default=None),
    type: str = Query(default="knowledge"),
    depth: str | None = Query(default=None),
    max_sources: str | None = Query(default=None),
    acl: list[str] | None = Query(default=None),
) -> JSONResponse:
    return _subgraph(ctx, caller, svc, item_id, database, collection, type, depth, max_sources, acl)
