"""The HTTP API's functions: one router group each (a cold start imports that group alone), behind Mangum."""

from __future__ import annotations

import importlib
from typing import Any

from mangum import Mangum

from ctxstore.config import Settings
from ctxstore.http.factory import create_app
from ctxstore.runtime.aws import build_aws
from ctxstore.runtime.lambda_entry import LambdaEntry
from ctxstore.runtime.lambda_observability import observed
from ctxstore.services.registry import Services


def api_handler(group: str) -> LambdaEntry:
    """The function serving `ctxstore.http.routers.<group>`."""
    router = importlib.import_module(f"ctxstore.http.routers.{group}").router
    services = Services(build_aws(Settings()))
    asgi = Mangum(create_app(services, [router]), lifespan="off")

    def handle(event: dict[str, Any], context: Any) -> Any:
        return asgi(event, context)

    return LambdaEntry(observed(handle, http=True), services)


def console_handler() -> LambdaEntry:
    """The web console: the API's conventions (request id, errors) with the console's own pages."""
    from ctxstore.console.mount import mount

    services = Services(build_aws(Settings()))
    app = create_app(services, [])
    mount(app, services)
    asgi = Mangum(app, lifespan="off")

    def handle(event: dict[str, Any], context: Any) -> Any:
        return asgi(event, context)

    return LambdaEntry(observed(handle, http=True), services)
