"""POST /feedback: a comment or ground truth about a query that ran (rules in services/feedback).

201 with the envelope, `data` the reference's `feedback.SubmitResponse`; 400 INVALID_PARAMETERS for a broken
rule (also `database` and `tenant_id` that differ), 404 DATABASE_NOT_FOUND. routers/query.py adds the route to
its router: on AWS the query function serves it.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body
from fastapi.responses import JSONResponse

from ctxstore.domain.errors import invalid
from ctxstore.http import envelope
from ctxstore.http.aliases import normalize_pairs
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope


def submit_feedback(ctx: Ctx, caller: Caller, svc: Svc, body: Any = Body()) -> JSONResponse:
    if not isinstance(body, dict):
        raise invalid("the body must be a JSON object")
    fields: dict[str, Any] = dict(normalize_pairs(body.items(), ctx, "the body"))
    if isinstance(fields.get("database"), str):
        echo_scope(
            ctx, fields["database"], fields.get("collection") if isinstance(fields.get("collection"), str) else None
        )
    return envelope.ok(ctx, svc.feedback.submit(caller, fields), status=201)
