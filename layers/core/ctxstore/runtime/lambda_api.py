"""The HTTP API's functions: one router group each (a cold start imports that group alone), behind Mangum."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from mangum import Mangum

from ctxstore.config import Settings
from ctxstore.http.factory import create_app
from ctxstore.runtime.aws import build_aws
from ctxstore.runtime.lambda_entry import LambdaEntry
from ctxstore.runtime.lambda_observability import observed
from ctxstore.services.registry import Services


def api_handler(group: str, uses: Sequence[str] = ()) -> LambdaEntry:
    """The function serving `ctxstore.http.routers.<group>`.

    The services its routes call (`uses`) are built here, in the cold start Lambda bills as INIT, so the first
    request does not pay for importing them, nor for the records client every request authenticates with.
    """
    router = importlib.import_module(f"ctxstore.http.routers.{group}").router
    settings = Settings()
    services = Services(build_aws(settings))
    asgi = Mangum(create_app(services, [router]), lifespan="off")
    _ = services.container.records  # every request authenticates against the records
    for name in uses:
        getattr(services, name)

    def handle(event: dict[str, Any], context: Any) -> Any:
        return asgi(event, context)

    return LambdaEntry(observed(handle, http=True, trace=settings.aws.trace_aws_calls), services)


def console_handler() -> LambdaEntry:
    """The web console: the API's conventions (request id, errors) with the console's own pages."""
    from ctxstore.console.mount import mount

    settings = Settings()
    services = Services(build_aws(settings))
    app = create_app(services, [])
    mount(app, services)
    for name in ("databases", "catalog"):  # what its first pages read (the playground loads retrieval on use)
        getattr(services, name)
    asgi = Mangum(app, lifespan="off")

    def handle(event: dict[str, Any], context: Any) -> Any:
        return asgi(event, context)

    return LambdaEntry(observed(handle, http=True, trace=settings.aws.trace_aws_calls), services)
