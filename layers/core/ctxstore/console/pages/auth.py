"""Sign in with an API key, sign out. The key is posted once, checked, and never stored or shown."""

from __future__ import annotations

import secrets

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from ctxstore.console import web
from ctxstore.console.sessions import same_token
from ctxstore.domain.errors import ApiError

router = APIRouter()

_ENDED = {
    "key": "Your session ended because its API key was revoked or has expired. Sign in with a valid key.",
    "expired": "Your session expired. Sign in again.",
    "signed-out": "You are signed out.",
}


def _cookie_kwargs(request: Request) -> dict[str, object]:
    return {
        "httponly": True,
        "samesite": "strict",
        "secure": request.url.scheme == "https",
        "path": web.base(request) or "/",
    }


def _sign_in_page(request: Request, status: int = 200, error: str = "", ended: str = "") -> Response:
    token = secrets.token_urlsafe(32)
    response = web.render(
        request, "sign_in.html", status=status, signin_csrf=token, error=error, notice=_ENDED.get(ended, "")
    )
    response.set_cookie(web.SIGNIN_CSRF_COOKIE, token, max_age=3600, **_cookie_kwargs(request))  # type: ignore[arg-type]
    return response


@router.get("/")
async def home(request: Request) -> Response:
    if web.sessions(request).find(request.cookies.get(web.SESSION_COOKIE)) is None:
        return web.redirect(request, "/sign-in")
    return web.redirect(request, "/databases")


@router.get("/sign-in")
async def sign_in_form(request: Request, ended: str = "") -> Response:
    return _sign_in_page(request, ended=ended)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    form = await request.form()
    # Before a session exists the CSRF token is a double-submit cookie (SameSite=Strict besides).
    if not same_token(request.cookies.get(web.SIGNIN_CSRF_COOKIE, ""), web.form_str(form, web.CSRF_FIELD)):
        raise web.CsrfRejected()
    key = web.form_str(form, "api_key")
    if not key:
        return _sign_in_page(request, 400, error="Enter an API key.")
    svc = web.services(request)
    try:
        principal = await anyio.to_thread.run_sync(svc.keys.authenticate, key)
    except ApiError as err:
        return _sign_in_page(request, 401, error=f"That key was not accepted: {err.message}.")
    token, _ = web.sessions(request).open(principal.org, principal.key_prefix)
    response = web.redirect(request, "/databases")
    response.set_cookie(web.SESSION_COOKIE, token, **_cookie_kwargs(request))  # type: ignore[arg-type]
    response.delete_cookie(web.SIGNIN_CSRF_COOKIE, path=web.base(request) or "/")
    return response


@router.post("/sign-out")
async def sign_out(request: Request, caller: web.Write) -> Response:
    web.sessions(request).end(caller.session)
    response = web.redirect(request, "/sign-in?ended=signed-out")
    response.delete_cookie(web.SESSION_COOKIE, path=web.base(request) or "/")
    return response
