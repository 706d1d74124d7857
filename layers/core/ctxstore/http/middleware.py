"""One ASGI middleware for the conventions every route shares.

In order: request id and timing, legacy `/tenants` routes, authentication,
rate limits, legacy scope names in the query string and JSON body, response
headers (request id, version, deprecation), and a last-resort 500 envelope.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode

import anyio.to_thread
from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxstore import API_VERSION
from ctxstore.domain import json_limits
from ctxstore.domain.errors import ApiError, ErrorCode, StoreUnavailable
from ctxstore.http.admission import Admission, Refused
from ctxstore.http.aliases import normalize_pairs
from ctxstore.http.context import RequestContext, get_context, route_family
from ctxstore.http.envelope import failure_body
from ctxstore.services.access.keys import KeyService
from ctxstore.services.access.rate_limit import RateLimiter

log = logging.getLogger("ctxstore.http")

LEGACY_PREFIX = "/tenants"
JSON_BODY_LIMIT = 8 * 1024 * 1024
QUERY_CLASS_PATHS = ("/query",)


def rate_class(method: str, path: str) -> str:
    if (method == "POST" and path in QUERY_CLASS_PATHS) or (
        method == "GET" and path.startswith("/context/") and path.endswith("subgraph")
    ):
        return "query"
    return "default"


def error_response(ctx: RequestContext, err: ApiError) -> JSONResponse:
    status, code = err.status, err.code.value
    if ctx.legacy_route and err.code is ErrorCode.DATABASE_ALREADY_EXISTS:
        status, code = 400, ErrorCode.INVALID_INPUT.value  # the legacy route's own contract
    if ctx.route_family == "byog" and err.code is ErrorCode.UNAUTHORIZED:
        status, code = 403, ErrorCode.FORBIDDEN.value  # BYOG answers bad keys with 403
    return JSONResponse(failure_body(ctx, code, err.message), status_code=status, headers=err.headers)


class ConventionsMiddleware:
    def __init__(
        self, app: ASGIApp, keys: KeyService, limiter: RateLimiter, admission: Admission | None = None
    ) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ctx = get_context(scope)
        path: str = scope["path"]
        if path == LEGACY_PREFIX or path.startswith(LEGACY_PREFIX + "/"):
            new_path = "/databases" + path[len(LEGACY_PREFIX) :]
            scope["path"] = new_path
            scope["raw_path"] = new_path.encode()
            ctx.legacy_route = True
            ctx.deprecate("/tenants routes are deprecated; use /databases instead.")
        ctx.route_family = route_family(scope["path"])
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                headers["X-Request-ID"] = ctx.request_id
                headers["X-API-Version"] = API_VERSION
                if ctx.deprecations:
                    headers["Deprecation"] = "true"
                    text = "; ".join(d["message"] for d in ctx.deprecations).replace('"', "'")
                    headers["Warning"] = f'299 ctxstore "{text}"'
            await send(message)

        gate = None
        if self.admission is not None:
            klass = self.admission.classify(scope["method"], scope["path"])
            gate = self.admission.gate(klass) if klass else None
            if gate is not None:
                try:
                    await gate.enter()
                except Refused as refused:
                    log.warning("refused (request_id=%s): %s", ctx.request_id, refused)
                    err = ApiError(
                        ErrorCode.SERVICE_UNAVAILABLE, str(refused), headers={"Retry-After": str(refused.retry_after_s)}
                    )
                    await error_response(ctx, err)(scope, receive, send_wrapper)
                    return
        try:
            await self._admitted(scope, receive, send_wrapper, ctx, lambda: started)
        finally:
            if gate is not None:
                gate.leave()

    async def _admitted(
        self, scope: Scope, receive: Receive, send_wrapper: Send, ctx: RequestContext, started: Any
    ) -> None:
        # Authentication reads the key store: its faults get the same answers as a route's (503 + Retry-After
        # for a transient one, the 500 envelope otherwise), never the server's bare text 500.
        try:
            try:
                receive = await self._prepare(scope, receive, ctx)
            except ApiError as err:
                await error_response(ctx, err)(scope, receive, send_wrapper)
                return
            await self.app(scope, receive, send_wrapper)
        except StoreUnavailable as exc:
            log.warning("dependency unavailable (request_id=%s): %s", ctx.request_id, exc)
            if started():
                raise
            unavailable = ApiError(
                ErrorCode.SERVICE_UNAVAILABLE,
                "a storage dependency is temporarily unavailable; retry with backoff",
                headers={"Retry-After": str(exc.retry_after_s)},
            )
            await error_response(ctx, unavailable)(scope, receive, send_wrapper)
        except Exception:
            log.exception("unhandled error (request_id=%s)", ctx.request_id)
            if started():
                raise
            body = failure_body(
                ctx, ErrorCode.INTERNAL_ERROR.value, f"internal error; quote request_id {ctx.request_id} to support"
            )
            await JSONResponse(body, status_code=500)(scope, receive, send_wrapper)

    async def _prepare(self, scope: Scope, receive: Receive, ctx: RequestContext) -> Receive:
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        version = [v for k, v in headers if k == "api-version"]
        if version and version[0].strip().split(".")[0] != "2":
            raise ApiError(
                ErrorCode.INVALID_PARAMETERS, f"unsupported API-Version '{version[0]}'; this server speaks 2"
            )
        if ctx.route_family != "public":
            auth = [v for k, v in headers if k == "authorization"]
            if len(auth) != 1:
                raise ApiError(
                    ErrorCode.UNAUTHORIZED,
                    "send exactly one 'Authorization: Bearer <API_KEY>' header"
                    if auth
                    else "missing 'Authorization: Bearer <API_KEY>' header",
                )
            scheme, _, token = auth[0].strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ApiError(ErrorCode.UNAUTHORIZED, "the Authorization header must use the Bearer scheme")
            ctx.principal = await anyio.to_thread.run_sync(self.keys.authenticate, token.strip())
            if self.limiter.enabled:
                klass = rate_class(scope["method"], scope["path"])
                self.limiter.check(ctx.principal.key_prefix, klass, anyio.current_time())
        qs = scope.get("query_string", b"").decode("latin-1")
        if qs:
            pairs = parse_qsl(qs, keep_blank_values=True)
            normalized = normalize_pairs(pairs, ctx, "the query string")
            if normalized != pairs:
                scope["query_string"] = urlencode([(k, str(v)) for k, v in normalized]).encode("latin-1")
        ctype = next((v for k, v in headers if k == "content-type"), "").split(";")[0].strip().lower()
        # FastAPI decodes a body as JSON when its type is application/json, application/*+json or absent.
        if ctype in ("", "application/json") or (ctype.startswith("application/") and ctype.endswith("+json")):
            return await self._normalize_json(scope, receive, ctx)
        return receive

    async def _normalize_json(self, scope: Scope, receive: Receive, ctx: RequestContext) -> Receive:
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > JSON_BODY_LIMIT:
                raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE, f"JSON body over {JSON_BODY_LIMIT} bytes")
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        ctx_state: dict[str, Any] = scope.setdefault("state", {})
        ctx_state["raw_body_size"] = len(body)
        json_limits.check_depth(body, "the JSON body")  # before any decoder (ours or the route's) recurses
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            normalized = dict(normalize_pairs(parsed.items(), ctx, "the JSON body"))
            if normalized != parsed:
                body = json.dumps(normalized).encode()
                headers = MutableHeaders(scope=scope)
                headers["content-length"] = str(len(body))
            ctx_state["json_body"] = normalized  # routes that read bodies themselves need not parse them again
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay
