"""`/ready` and `/metrics` of the local server (`/health` is in routers/health.py).

/ready: 200 when every engine that loads after start is loaded (the first query would answer now), else 503
with each part's state. /metrics: the Prometheus text. Neither takes an API key: /metrics answers a loopback
client, or anyone sending `Authorization: Bearer <CTXSTORE_METRICS_TOKEN>` when that is set (then only them).
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import asdict, dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from ctxstore import API_VERSION
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.observability.prometheus import PrometheusMetrics
from ctxstore.observability.readiness import READY, Readiness


@dataclass
class Observability:
    metrics: PrometheusMetrics = field(default_factory=PrometheusMetrics)
    readiness: Readiness = field(default_factory=Readiness)
    metrics_token: str = ""  # empty: /metrics answers loopback clients only


def _loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _allowed(request: Request, token: str) -> bool:
    if not token:
        return _loopback(request)
    scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def install(app: FastAPI, o: Observability) -> None:
    @app.get("/ready", tags=["health"], include_in_schema=False)
    def ready() -> JSONResponse:
        snapshot = o.readiness.parts()
        ready = all(p.state == READY for p in snapshot.values())
        parts = {name: {k: v for k, v in asdict(p).items() if v not in (None, "")} for name, p in snapshot.items()}
        body = {"status": "ready" if ready else "loading", "api_version": API_VERSION, "parts": parts}
        return JSONResponse(body, status_code=200 if ready else 503, headers=None if ready else {"Retry-After": "1"})

    @app.get("/metrics", tags=["health"], include_in_schema=False)
    def metrics(request: Request) -> Response:
        if not _allowed(request, o.metrics_token):
            why = "a valid metrics token" if o.metrics_token else "a loopback client (or set CTXSTORE_METRICS_TOKEN)"
            raise ApiError(ErrorCode.FORBIDDEN, f"/metrics answers {why}")
        body, content_type = o.metrics.render()
        return Response(body, media_type=content_type)
