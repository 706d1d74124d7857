"""What a Lambda function's module exports as `handler`: a callable that also names the container it built."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the health check imports this module and must not load the services
    from ctxstore.services.container import Container
    from ctxstore.services.registry import Services


class LambdaEntry:
    """The handler Lambda calls, with the container and services behind it (tests and diagnostics read them)."""

    def __init__(self, fn: Callable[[dict[str, Any], Any], Any], services: Services | None = None) -> None:
        self._fn = fn
        self.services = services
        self.container: Container | None = services.container if services is not None else None

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        return self._fn(event, context)
