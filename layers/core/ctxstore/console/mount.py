"""The console app, mounted at /console on the API's own app (same process, port and services)."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxstore.console import web
from ctxstore.console.form_tokens import OneTimeForms
from ctxstore.console.lazy_mount import PREFIX, favicon
from ctxstore.console.outcomes import Outcomes
from ctxstore.console.pages import (
    auth,
    byog,
    connectors,
    databases,
    graphs,
    items,
    keys,
    playground,
    webhooks,
)
from ctxstore.console.sessions import SessionStore
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.registry import Services

log = logging.getLogger("ctxstore.console")


# Scripts and styles come only from the console's own static files (no CDN, no inline script). Requests go to
# this origin, and to the blob store's when uploads go there by reference (S3 on AWS).
def content_security_policy(upload_origin: str = "") -> str:
    connect = "'self'" + (f" {upload_origin}" if upload_origin else "")
    return (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        f"connect-src {connect}; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


def upload_origin(services: Services) -> str:
    """Where upload grants send files: S3's origin on AWS; '' when it is this server (a relative URL).

    A grant's URL is signed locally (no network), and its host does not depend on the key."""
    try:
        grant = services.container.blobs.presigned_post("_console", "_probe", expires_in=60, max_bytes=1)
    except Exception as exc:  # e.g. no AWS credentials to sign with: the pages still serve, large uploads fail
        log.warning("console: upload grants cannot be signed (%s); large uploads will be refused", exc)
        return ""
    parts = urlsplit(grant.url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else ""


class SecurityHeaders:
    def __init__(self, app: ASGIApp, csp: str) -> None:
        self.app = app
        self.headers = [
            (b"content-security-policy", csp.encode()),
            (b"x-frame-options", b"DENY"),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).extend(self.headers)
            await send(message)

        await self.app(scope, receive, with_headers)


def build_console(services: Services) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.services = services
    app.state.sessions = SessionStore(services.container.records, services.container.clock)
    app.state.forms = OneTimeForms(services.container.records, services.container.clock)
    app.state.outcomes = Outcomes(services.container.records, services.container.clock)
    for module in (auth, keys, databases, items, playground, graphs, byog, webhooks, connectors):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=web.HERE / "static"), name="static")
    app.add_middleware(SecurityHeaders, csp=content_security_policy(upload_origin(services)))

    @app.exception_handler(web.SignInRequired)
    async def sign_in_required(request: Request, exc: web.SignInRequired) -> Response:
        to = "/sign-in" + (f"?ended={exc.reason}" if exc.reason else "")
        if request.method == "GET" or web.is_htmx(request):
            return web.redirect(request, to)
        return web.render(request, "error.html", status=401, problem=_problem(request, ErrorCode.UNAUTHORIZED))

    @app.exception_handler(web.CsrfRejected)
    async def csrf_rejected(request: Request, exc: web.CsrfRejected) -> Response:
        log.warning("console: CSRF token missing or wrong on %s %s", request.method, request.url.path)
        problem = web.Problem(
            "This form has expired or did not come from the console.",
            "Reload the page and try again (the request carried no valid CSRF token).",
            ErrorCode.FORBIDDEN.value,
            403,
            web.request_id(request),
        )
        return web.render(request, "error.html", status=403, problem=problem)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        if request.url.path.endswith(".json") or request.headers.get("accept") == "application/json":
            return web.problem_json(request, exc)
        caller = await _caller_or_none(request)
        return web.render(request, "error.html", caller, status=exc.status, problem=web.Problem.of(request, exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
        err = ApiError(ErrorCode.INVALID_PARAMETERS, f"'{where}': {first.get('msg', 'invalid')}")
        return await api_error(request, err)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(exc.status_code)
        err = ApiError(code or ErrorCode.INVALID_PARAMETERS, f"no console page {request.method} {request.url.path}")
        return await api_error(request, err)

    return app


def _problem(request: Request, code: ErrorCode) -> web.Problem:
    return web.Problem.of(request, ApiError(code, "sign in again to continue"))


async def _caller_or_none(request: Request) -> web.Caller | None:
    try:
        return await web.signed_in(request)
    except web.SignInRequired:
        return None


def mount(app: FastAPI, services: Services) -> None:
    """Built now: the console's Lambda function does it at init. The local server mounts `lazy_mount.mount`."""
    app.add_api_route("/favicon.ico", favicon, methods=["GET"], include_in_schema=False)
    app.mount(PREFIX, build_console(services))
