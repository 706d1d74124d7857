"""FastAPI dependencies: the request context, the caller, the services.

`async def` although nothing awaits: FastAPI runs a plain `def` dependency in the worker-thread
pool, one thread hop (~0.1-0.3 ms on 2 busy cores) per dependency per request for a dict lookup.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.http.context import RequestContext, get_context
from ctxstore.services.access.principal import Principal
from ctxstore.services.registry import Services


async def context(request: Request) -> RequestContext:
    ctx = get_context(request.scope)
    route = request.scope.get("route")
    if route is not None and ctx.route is None:  # the envelope's shape depends on it (http/reference_shape.py)
        ctx.route = (request.method, str(getattr(route, "path", "")))
    return ctx


async def principal(request: Request) -> Principal:
    p = get_context(request.scope).principal
    if p is None:  # only public routes run without one, and they do not ask for it
        raise ApiError(ErrorCode.UNAUTHORIZED, "authentication required")
    return p


async def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


Ctx = Annotated[RequestContext, Depends(context)]
Caller = Annotated[Principal, Depends(principal)]
Svc = Annotated[Services, Depends(services)]


def echo_scope(ctx: RequestContext, database: str, collection: str | None = None) -> None:
    ctx.scope_echo["database"] = database
    if collection is not None:
        ctx.scope_echo["collection"] = collection
