"""The composition root: the only package that imports adapters and connectors (an import contract says so).

It builds the ports for the configured backend (`local`: embedded engines, built up front by `serve`; `aws`:
factories that build an adapter the first time a service touches it), the services over them, and each Lambda
function's handler (`lambda_handlers.handler_for`). Every entry point starts here: `ctxstore serve` and the CLI's
server verbs, the 19 `functions/*/app.py`, the MCP server over stdio and the benchmarks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the package is every entry point's first import: the health check must stay stdlib-only
    from ctxstore.config import Settings
    from ctxstore.services.container import Container


def build_container(settings: Settings | None = None) -> Container:
    """The container for CTXSTORE_BACKEND (local by default)."""
    from ctxstore.config import Settings

    settings = settings or Settings()
    if settings.backend == "local":
        from ctxstore.runtime.local import build_local

        return build_local(settings)
    from ctxstore.runtime.aws import build_aws

    return build_aws(settings)
