"""What every console page shares: the signed-in caller, CSRF checks, rendering, plain-words errors."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from ctxstore.console import outcomes as outcome_store
from ctxstore.console.form_tokens import OneTimeForms
from ctxstore.console.sessions import Session, SessionStore, same_token
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.http.context import get_context
from ctxstore.services.access.principal import Principal
from ctxstore.services.registry import Services

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

HERE = Path(__file__).parent
SESSION_COOKIE = "ctxstore_console"
SIGNIN_CSRF_COOKIE = "ctxstore_console_signin"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"

templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
templates.filters["urlq"] = lambda v: quote(str(v), safe="")


def relative(iso: str | None, now: float | None = None) -> str:
    """An ISO time as a person reads it next to the time itself: '3 min ago', 'in 2 h'."""
    if not iso:
        return ""
    try:
        at = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return ""
    delta = at - (time.time() if now is None else now)
    s = abs(delta)
    text = (
        "just now"
        if s < 5
        else f"{int(s)} s"
        if s < 60
        else f"{int(s // 60)} min"
        if s < 3600
        else f"{int(s // 3600)} h"
        if s < 172800
        else f"{int(s // 86400)} days"
    )
    if text == "just now":
        return text
    return f"in {text}" if delta > 0 else f"{text} ago"


def when(value: str | float | None) -> str:
    """Every timestamp on every page in one format: '2026-11-27 03:47:12 UTC' (ISO text or epoch seconds)."""
    if value is None or value == "":
        return ""
    try:
        if isinstance(value, int | float):
            at = datetime.fromtimestamp(float(value), UTC)
        else:
            at = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return str(value)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def size(n: int | float | None) -> str:
    """Bytes in the unit a person reads: '930 bytes', '1.2 KB', '3.4 MB' (binary multiples, as file managers)."""
    if n is None:
        return ""
    value = float(n)
    if value < 1024:
        return f"{int(value)} byte{'' if int(value) == 1 else 's'}"
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            return f"{value:.1f} {unit}"
    return f"{value:.1f} TB"


@cache
def _markdown() -> MarkdownIt:
    """CommonMark with raw HTML off: a `<script>` in an item is shown as text; markdown-it also refuses
    javascript:/vbscript:/file: links and data: links other than images. Built on first use: only item
    pages need it, and the console's Lambda cold start should not pay for it."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False})


def markdown(text: str | None) -> Markup:
    """An item's text as HTML. Its headings start at h3: the page's h1 is the item and its h2 the section."""
    md = _markdown()
    tokens = md.parse(text or "")
    for t in tokens:
        if t.type in ("heading_open", "heading_close"):
            t.tag = f"h{min(6, int(t.tag[1]) + 2)}"
    # Safe: markdown-it escapes every raw HTML tag (html off).
    return Markup(md.renderer.render(tokens, md.options, {}))


templates.filters["relative"] = relative
templates.filters["markdown"] = markdown
templates.filters["when"] = when
templates.filters["size"] = size

# What a person should read first for each error code; the service's own message follows it.
_HEADLINES = {
    ErrorCode.UNAUTHORIZED: "Your API key is not accepted.",
    ErrorCode.FORBIDDEN: "This API key is not allowed to do that.",
    ErrorCode.DATABASE_NOT_FOUND: "That database does not exist, or this key cannot see it.",
    ErrorCode.SOURCE_NOT_FOUND: "That item does not exist in this database and collection.",
    ErrorCode.FILE_NOT_FOUND: "There is no status for that item.",
    ErrorCode.NOT_FOUND: "Not found.",
    ErrorCode.DATABASE_ALREADY_EXISTS: "A database with that name already exists.",
    ErrorCode.CONFLICT: "That conflicts with what is stored now.",
    ErrorCode.INVALID_PARAMETERS: "Some of the values are missing or malformed.",
    ErrorCode.INVALID_INPUT: "One of the values is not allowed.",
    ErrorCode.VALIDATION_ERROR: "One of the values is not allowed.",
    ErrorCode.PAYLOAD_TOO_LARGE: "That is too large.",
    ErrorCode.RATE_LIMITED: "Too many requests; wait a moment and try again.",
    ErrorCode.SERVICE_UNAVAILABLE: "The service is busy or a store is unavailable; try again shortly.",
    ErrorCode.INTERNAL_ERROR: "Something went wrong on the server.",
}


@dataclass(frozen=True)
class Problem:
    """An error as a page shows it."""

    headline: str
    message: str
    code: str
    status: int
    request_id: str

    @staticmethod
    def of(request: Request, err: ApiError, refused: str = "") -> Problem:
        """`refused`: the headline when the service refused the request as a whole (its code says "invalid
        parameters", yet nothing was missing or malformed: a Cypher query the engine refuses, a webhook URL)."""
        headline = _HEADLINES.get(err.code, "That did not work.")
        if refused and err.code in (ErrorCode.INVALID_PARAMETERS, ErrorCode.INVALID_INPUT):
            headline = refused
        return Problem(
            headline,
            err.message,
            err.code.value,
            err.status,
            request_id(request),
        )


class SignInRequired(Exception):
    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class CsrfRejected(Exception):
    pass


@dataclass(frozen=True)
class Caller:
    principal: Principal
    session: Session
    services: Services


def request_id(request: Request) -> str:
    return get_context(request.scope).request_id


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


def sessions(request: Request) -> SessionStore:
    store: SessionStore = request.app.state.sessions
    return store


def forms(request: Request) -> OneTimeForms:
    one_time: OneTimeForms = request.app.state.forms
    return one_time


def outcomes(request: Request) -> outcome_store.Outcomes:
    kept: outcome_store.Outcomes = request.app.state.outcomes
    return kept


def base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


async def signed_in(request: Request) -> Caller:
    """The caller of a live session whose key is still valid; otherwise back to the sign-in page."""
    store = sessions(request)
    session = store.find(request.cookies.get(SESSION_COOKIE))
    if session is None:
        raise SignInRequired("expired" if request.cookies.get(SESSION_COOKIE) else "")
    svc = services(request)
    try:
        principal = svc.keys.principal_for(session.key_prefix)
    except ApiError:
        store.end(session)  # the key was revoked or expired: the session ends with it
        raise SignInRequired("key") from None
    return Caller(principal, session, svc)


async def checked_write(request: Request, caller: Annotated[Caller, Depends(signed_in)]) -> Caller:
    """A state-changing request: the session's CSRF token must come back as a form field or header."""
    given = request.headers.get(CSRF_HEADER)
    if given is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        value = (await request.form()).get(CSRF_FIELD)
        given = value if isinstance(value, str) else None
    if not same_token(caller.session.csrf_token, given):
        raise CsrfRejected()
    return caller


SignedIn = Annotated[Caller, Depends(signed_in)]
Write = Annotated[Caller, Depends(checked_write)]


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def render(request: Request, name: str, caller: Caller | None = None, status: int = 200, **values: Any) -> HTMLResponse:
    shown: dict[str, Any] = {}
    if caller is not None and outcome_store.FIELD in request.query_params:  # the redirect of a POST (done())
        shown = outcomes(request).read(caller.session, request.query_params[outcome_store.FIELD])
    ctx: dict[str, Any] = {
        **shown,
        "base": base(request),
        "request_id": request_id(request),
        "user": caller,
        "csrf": caller.session.csrf_token if caller else "",
        "path": request.url.path,
        **values,
    }
    html = templates.get_template(name).render(ctx)
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})


def redirect(request: Request, to: str) -> Response:
    """303 to a console path; an htmx request gets HX-Redirect so the whole page moves."""
    url = base(request) + to
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def done(request: Request, caller: Caller, to: str, **outcome: Any) -> Response:
    """Post/Redirect/Get after a successful POST: its outcome is kept and the redirected page shows it, so a
    reload posts nothing again and the address bar holds a GET address."""
    token = outcomes(request).keep(caller.session, outcome)
    path, _, fragment = to.partition("#")
    path += ("&" if "?" in path else "?") + f"{outcome_store.FIELD}={token}"
    return redirect(request, path + (f"#{fragment}" if fragment else ""))


def problem_json(request: Request, err: ApiError) -> JSONResponse:
    p = Problem.of(request, err)
    return JSONResponse(
        {"error": {"code": p.code, "message": p.message, "headline": p.headline}, "request_id": p.request_id},
        status_code=p.status,
    )


def form_str(form: Any, name: str, default: str = "") -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else default


def json_field(raw: str, name: str, want: type = dict) -> Any:
    """A JSON value typed into a form field, or INVALID_PARAMETERS naming the field."""
    if not raw.strip():
        return want()
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{name}' is not valid JSON: {exc}") from None
    if not isinstance(value, want):
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{name}' must be a JSON {want.__name__}")
    return value


def api_base(request: Request) -> str:
    """Where the HTTP API is served: the console's own origin, without its mount path."""
    return str(request.base_url).rstrip("/").removesuffix(base(request))


def typed_mismatch(form: Any, expected: str, action: str) -> ApiError | None:
    """A destructive form needs the name typed back exactly; the error to show when it was not."""
    if form_str(form, "confirm") == expected:
        return None
    return ApiError(ErrorCode.INVALID_INPUT, f"type '{expected}' exactly to confirm {action}")
