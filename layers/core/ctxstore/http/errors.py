"""Exception handlers: every failure leaves in the envelope with the interface's code."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.http.context import get_context
from ctxstore.http.envelope import failure_body
from ctxstore.http.middleware import error_response

# pydantic error types that mean "missing or not the right shape" (400) rather than
# "well-formed but not a valid value" (422).
_SHAPE_ERRORS = (
    "missing",
    "json_invalid",
    "json_type",
    "model_attributes_type",
    "dict_type",
    "list_type",
    "string_type",
    "int_type",
    "float_type",
    "bool_type",
    "int_parsing",
    "float_parsing",
    "bool_parsing",
    "model_type",
    "extra_forbidden",
    "none_required",
    "is_instance_of",
)


def _field_name(loc: tuple[Any, ...]) -> str:
    # Only the first element names the location; a field may itself be called "query" (POST /query).
    if loc and loc[0] in ("body", "query", "path", "header", "form"):
        loc = loc[1:]
    parts = [str(p) for p in loc]
    return ".".join(parts) or "body"


def _validation_error(err: RequestValidationError) -> ApiError:
    errors = err.errors()
    first = errors[0] if errors else {"type": "missing", "loc": ("body",), "msg": "invalid request"}
    name = _field_name(tuple(first.get("loc", ())))
    etype = str(first.get("type", ""))
    if etype == "missing":
        return ApiError(ErrorCode.INVALID_PARAMETERS, f"'{name}' is required")
    if etype.startswith("json") or name == "body":
        return ApiError(ErrorCode.INVALID_PARAMETERS, f"malformed request body: {first.get('msg')}")
    code = ErrorCode.INVALID_PARAMETERS if etype in _SHAPE_ERRORS else ErrorCode.VALIDATION_ERROR
    return ApiError(code, f"'{name}': {first.get('msg')}")


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return error_response(get_context(request.scope), exc)

    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError) -> Response:
        return error_response(get_context(request.scope), _validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        ctx = get_context(request.scope)
        if exc.status_code == 404:
            code, msg = ErrorCode.NOT_FOUND, f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            code, msg = ErrorCode.METHOD_NOT_ALLOWED, f"method {request.method} is not allowed on {request.url.path}"
        elif exc.status_code == 413:
            code, msg = ErrorCode.PAYLOAD_TOO_LARGE, str(exc.detail)
        elif exc.status_code >= 500:
            code, msg = ErrorCode.INTERNAL_ERROR, "internal error"
        else:
            code, msg = ErrorCode.INVALID_PARAMETERS, str(exc.detail)
        return JSONResponse(
            failure_body(ctx, code.value, msg), status_code=exc.status_code, headers=dict(exc.headers or {})
        )
