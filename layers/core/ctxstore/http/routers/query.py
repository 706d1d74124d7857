"""POST /query: FastAPI checks the body's JSON types against services/query/request.QueryBody (and documents it from
that model); every rule lives in services/query."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.scopes import validate_collection_name, validate_database_name
from ctxstore.http import envelope
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope
from ctxstore.http.routers import feedback
from ctxstore.services.query.request import QueryBody

router = APIRouter(tags=["query"])
# Feedback is about a query: the same router (so the same function on AWS) serves it.
router.add_api_route("/feedback", feedback.submit_feedback, methods=["POST"], status_code=201, tags=["feedback"])


@router.post("/query")
def query(body: QueryBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    validate_database_name(body.database)
    if body.collections is None:
        echo_scope(ctx, body.database, validate_collection_name(body.collection))
    else:
        echo_scope(ctx, body.database)
    filters = body.metadata_filters or {}
    if isinstance(filters, dict) and "document_metadata" in filters:
        ctx.deprecate(
            "metadata_filters.document_metadata is deprecated; use metadata_filters.additional_metadata instead.",
            "metadata_filters.document_metadata",
            "metadata_filters.additional_metadata",
        )
    if svc.query is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "query is not configured on this deployment")
    return envelope.ok(ctx, svc.query.query(caller, body))
