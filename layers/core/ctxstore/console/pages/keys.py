"""API keys of the caller's organisation: create (shown once), list by prefix, revoke."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ctxstore.console import web
from ctxstore.domain.api_keys import parse_duration
from ctxstore.domain.errors import ApiError, ErrorCode

router = APIRouter()

EXPIRY_CHOICES = [("", "Never"), ("1d", "1 day"), ("7d", "7 days"), ("30d", "30 days"), ("90d", "90 days")]


when = web.when


def _page(request: Request, caller: web.Caller, status: int = 200, **values: object) -> Response:
    now = caller.services.container.clock.now()
    keys = caller.services.keys.list_for(caller.principal)
    rows = [
        {
            "prefix": k.prefix,
            "name": k.name,
            "created": when(k.created_at),
            "expires": when(k.expires_at) or "Never",
            "last_used": when(k.last_used_at) or "Not yet",
            "state": "revoked" if k.revoked else ("expired" if k.expires_at and k.expires_at <= now else "active"),
            "databases": ", ".join(k.databases) if k.databases is not None else "All databases",
            "current": k.prefix == caller.principal.key_prefix,
        }
        for k in keys
    ]
    dbs = caller.services.databases.list(caller.principal)["databases"]
    return web.render(
        request,
        "keys.html",
        caller,
        status=status,
        section="keys",
        keys=rows,
        databases=dbs,
        expiry_choices=EXPIRY_CHOICES,
        form_token=web.forms(request).issue(),
        **values,
    )


@router.get("/keys")
def keys_page(request: Request, caller: web.SignedIn) -> Response:
    return _page(request, caller)


@router.post("/keys")
async def create_key(request: Request, caller: web.Write) -> Response:
    form = await request.form()
    expiry = web.form_str(form, "expires_in")
    scoped = web.form_str(form, "scope") == "some"
    name = web.form_str(form, "name")
    chosen = [v for v in form.getlist("databases") if isinstance(v, str) and v]
    # A reload of the answer posts this form again: its one-time token makes that create nothing.
    once, form_token = web.forms(request), web.form_str(form, "form_token")
    earlier = once.claim(caller.session, form_token)
    if earlier is not None:
        return _page(request, caller, status=409, problem=_repeated(request, earlier))
    try:
        try:
            seconds = parse_duration(expiry) if expiry else None
        except ValueError as exc:
            raise ApiError(ErrorCode.INVALID_INPUT, str(exc)) from None
        if scoped and not chosen:
            raise ApiError(ErrorCode.INVALID_INPUT, "choose at least one database, or allow all databases")
        new_key = caller.services.keys.create_for(
            caller.principal, expires_in_s=seconds, databases=chosen if scoped else None, name=name
        )
    except ApiError as err:
        once.release(caller.session, form_token)
        return _page(request, caller, status=err.status, problem=web.Problem.of(request, err))
    prefix = new_key.split("_")[1]
    once.record(caller.session, form_token, {"prefix": prefix})
    # The one response that carries the secret: not cached, never shown again.
    return _page(request, caller, status=201, new_key=new_key, new_prefix=prefix, new_name=name)


def _repeated(request: Request, earlier: dict[str, object]) -> web.Problem:
    prefix = earlier.get("prefix")
    message = (
        f"It created key {prefix} at {when(float(str(earlier['claimed_at'])))}; that secret was shown once and is"
        " not stored, so it cannot be shown again. Revoke the key below if the secret is lost, and create another."
        if prefix
        else "It created nothing. Use the form below."
    )
    err = ApiError(ErrorCode.CONFLICT, message)
    return replace(web.Problem.of(request, err), headline="This form was already sent; no second key was created.")


@router.post("/keys/{prefix}/revoke")
async def revoke_key(prefix: str, request: Request, caller: web.Write) -> Response:
    caller.services.keys.revoke_for(caller.principal, prefix)
    if prefix == caller.principal.key_prefix:
        web.sessions(request).end(caller.session)
        return web.redirect(request, "/sign-in?ended=key")
    return web.done(request, caller, "/keys", revoked=prefix)
