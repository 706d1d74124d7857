"""POST /query: the body's JSON types are checked here; every rule lives in services/query."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.scopes import validate_collection_name, validate_database_name
from ctxstore.http import envelope
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope
from ctxstore.http.routers import feedback

router = APIRouter(tags=["query"])
# Feedback is about a query: the same router (so the same function on AWS) serves it.
router.add_api_route("/feedback", feedback.submit_feedback, methods=["POST"], status_code=201, tags=["feedback"])


class QueryBody(BaseModel):
    # The reference carries more optional knobs (temporal_*, graph_vector_prune...): accepted, not used.
    model_config = ConfigDict(extra="ignore")
    database: StrictStr
    query: StrictStr
    collection: StrictStr | None = None
    collections: list[StrictStr] | dict[StrictStr, StrictInt | StrictFloat] | None = None
    type: StrictStr | None = None
    query_by: StrictStr | None = None
    operator: StrictStr | None = None
    mode: StrictStr | None = None
    alpha: StrictInt | StrictFloat | StrictStr | None = None
    max_results: StrictInt | None = None
    metadata_filters: dict[str, Any] | None = None
    graph_context: StrictBool | None = None
    query_apps: StrictBool | None = None
    recency_bias: StrictInt | StrictFloat | None = None
    ids: list[StrictStr] | None = None
    num_related_chunks: StrictInt | None = None
    additional_context: StrictStr | None = None
    query_forceful_relations: StrictBool | None = None


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
    return envelope.ok(ctx, svc.query.query(caller, body.model_dump()))
