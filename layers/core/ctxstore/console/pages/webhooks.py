"""The indexing webhook of the signed-in key: register, rotate the secret, test, deliveries and retry."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ctxstore.console import web
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.webhooks.rules import DELIVERY_STATUSES
from ctxstore.services.webhooks.service import WebhookService

router = APIRouter()


def _hooks(caller: web.Caller) -> WebhookService:
    if caller.services.webhooks is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "webhooks are not configured on this deployment")
    return caller.services.webhooks


def _page(request: Request, caller: web.Caller, status: int = 200, **values: Any) -> Response:
    hooks = _hooks(caller)
    wanted = request.query_params.get("status") or None
    wanted = wanted if wanted in DELIVERY_STATUSES else None
    hook = hooks.get(caller.principal)
    deliveries = hooks.list_deliveries(caller.principal, 50, None, wanted) if hook.get("registered", True) else None
    return web.render(
        request,
        "webhooks.html",
        caller,
        status=status,
        section="webhooks",
        hook=hook,
        registered=bool(hook.get("url")),
        deliveries=deliveries["deliveries"] if deliveries else [],
        statuses=DELIVERY_STATUSES,
        wanted=wanted or "",
        allow_private=caller.services.webhooks.settings.allow_private,
        **values,
    )


@router.get("/webhooks")
def webhooks_page(request: Request, caller: web.SignedIn) -> Response:
    return _page(request, caller)


@router.get("/webhooks/deliveries")
def deliveries_partial(request: Request, caller: web.SignedIn) -> Response:
    hooks = _hooks(caller)
    data = hooks.list_deliveries(caller.principal, 50, None, None)
    return web.render(request, "partials/deliveries.html", caller, deliveries=data["deliveries"])


@router.post("/webhooks")
async def register(request: Request, caller: web.Write) -> Response:
    form = await request.form()
    url = web.form_str(form, "url")
    try:
        data = await run_in_threadpool(
            _hooks(caller).register, caller.principal, url, None, None, form.get("generate_secret") == "on"
        )
    except ApiError as err:
        problem = web.Problem.of(request, err, refused="That URL cannot receive webhooks.")
        return _page(request, caller, status=err.status, problem=problem, typed_url=url)
    if data.get("signing_secret"):  # shown once, in this answer only (never kept for a redirect)
        return _page(request, caller, status=201, new_secret=data["signing_secret"], saved=True)
    return web.done(request, caller, "/webhooks", saved=True)


@router.get("/webhooks/rotate-secret")
def rotate_address(request: Request, caller: web.SignedIn) -> Response:
    """The address bar after a rotation (its answer shows the new secret once): opening it shows the page."""
    return web.redirect(request, "/webhooks")


@router.post("/webhooks/rotate-secret")
async def rotate(request: Request, caller: web.Write) -> Response:
    data = _hooks(caller).set_secret(caller.principal, None)
    return _page(request, caller, new_secret=data["signing_secret"])


@router.post("/webhooks/test")
async def send_test(request: Request, caller: web.Write) -> Response:
    result = await run_in_threadpool(_hooks(caller).send_test, caller.principal)
    return web.done(request, caller, "/webhooks", test=result)


@router.post("/webhooks/delete")
async def delete(request: Request, caller: web.Write) -> Response:
    _hooks(caller).delete(caller.principal)
    return web.done(request, caller, "/webhooks", removed=True)


@router.post("/webhooks/deliveries/{delivery_id}/retry")
async def retry(delivery_id: str, request: Request, caller: web.Write) -> Response:
    try:
        _hooks(caller).retry_delivery(caller.principal, delivery_id)
    except ApiError as err:
        return _page(request, caller, status=err.status, problem=web.Problem.of(request, err))
    return web.done(request, caller, "/webhooks", retried=delivery_id)
