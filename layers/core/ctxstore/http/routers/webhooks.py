"""/webhooks/indexing*: the indexing webhook of the calling API key, its signing secret and deliveries.

Success bodies serve both documents (http/reference_shape.py): the reference's envelope, whose `data` is
its `webhooks.*` object, with that object's fields also at the top level (the spec's "own object").
Failures keep the one failure body every route shares (the reference's `handler.ErrorResponse`):
`{"success": false, "data": null, "error": {"code", "message"}, "meta"}`, so clients branch on
`error.code` the same way everywhere. Statuses:

* 400 `INVALID_PARAMETERS`: malformed body or query, an unsupported event type, both
  `signing_secret` and `generate_signing_secret`, a URL that is not http(s), does not resolve or
  resolves to a refused address (loopback, private, link-local, CGNAT, multicast, unspecified,
  metadata), a bad `limit`, `status` or `cursor`.
* 401 `UNAUTHORIZED`: the middleware's authentication (every route here needs a key).
* 404 `NOT_FOUND`: no webhook registered for this key (delete, signing secret, test, retry) or
  no such delivery for this key.
* 409 `CONFLICT`: retrying a delivery that is pending or completed.
* 422 `VALIDATION_ERROR`: a supplied signing secret shorter than 16 characters or not usable as a
  Standard Webhooks secret.
* 503 `SERVICE_UNAVAILABLE`: this server has no outbound HTTP configured.

Registration is an upsert and answers 201 each time; omitting `signing_secret` keeps the
current one. A webhook belongs to the calling key within its organisation: another key of the
same organisation has its own (or none), and sees none of this key's deliveries.
"""

from __future__ import annotations

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.http import envelope
from ctxstore.http.deps import Caller, Ctx, Svc
from ctxstore.services.registry import Services
from ctxstore.services.webhooks.service import WebhookService

router = APIRouter(tags=["webhooks"])


class WebhookRegisterBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    url: str
    event_types: list[str] | None = None
    signing_secret: str | None = None
    generate_signing_secret: bool = False


class SigningSecretBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    signing_secret: str | None = None


def _webhooks(svc: Services) -> WebhookService:
    if svc.webhooks is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "webhooks are not configured on this server")
    return svc.webhooks


@router.post("/webhooks/indexing", status_code=201)
def register_webhook(body: WebhookRegisterBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    out = _webhooks(svc).register(caller, body.url, body.event_types, body.signing_secret, body.generate_signing_secret)
    return envelope.ok(ctx, out, status=201)


@router.get("/webhooks/indexing")
def get_webhook(ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).get(caller))


@router.delete("/webhooks/indexing")
def delete_webhook(ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).delete(caller))


@router.post("/webhooks/indexing/signing-secret")
def set_signing_secret(
    ctx: Ctx, caller: Caller, svc: Svc, body: SigningSecretBody | None = Body(default=None)
) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).set_secret(caller, body.signing_secret if body else None))


@router.delete("/webhooks/indexing/signing-secret")
def clear_signing_secret(ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).clear_secret(caller))


@router.get("/webhooks/indexing/deliveries")
def list_deliveries(
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    limit: int | None = Query(default=None),
    cursor: str | None = Query(default=None),
    status: str | None = Query(default=None),
) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).list_deliveries(caller, limit, cursor or None, status or None))


@router.get("/webhooks/indexing/deliveries/{delivery_id}")
def get_delivery(delivery_id: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).get_delivery(caller, delivery_id))


@router.post("/webhooks/indexing/deliveries/{delivery_id}/retry")
def retry_delivery(delivery_id: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).retry_delivery(caller, delivery_id))


@router.post("/webhooks/indexing/test")
def test_webhook(ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _webhooks(svc).send_test(caller))
