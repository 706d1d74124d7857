"""Each Lambda function's handler, by the name of its folder under functions/ (its `app.py` is two lines).

A builder imports only what its function runs: an API function its one router group, a task its pipeline
step; the ports behind them are built on first use (runtime/aws.py).
"""

from __future__ import annotations

from collections.abc import Callable

from ctxstore.runtime.lambda_entry import LambdaEntry


def _api(group: str, *uses: str) -> Callable[[], LambdaEntry]:
    """API function over routers.<group>; `uses` are the services its routes call, built during the cold start."""

    def build() -> LambdaEntry:
        from ctxstore.runtime.lambda_api import api_handler

        return api_handler(group, uses)

    return build


def _ingest(step: str) -> Callable[[], LambdaEntry]:
    def build() -> LambdaEntry:
        from ctxstore.runtime.lambda_jobs import ingest_step_handler

        return ingest_step_handler(step)

    return build


def _health() -> LambdaEntry:
    from ctxstore.runtime.lambda_health import health_handler

    return health_handler()


def _console() -> LambdaEntry:
    from ctxstore.runtime.lambda_api import console_handler

    return console_handler()


def _job_worker() -> LambdaEntry:
    from ctxstore.runtime.lambda_jobs import job_worker_handler

    return job_worker_handler()


def _ingest_starter() -> LambdaEntry:
    from ctxstore.runtime.lambda_jobs import ingest_starter_handler

    return ingest_starter_handler()


def _webhook_dispatch() -> LambdaEntry:
    from ctxstore.runtime.lambda_jobs import webhook_dispatch_handler

    return webhook_dispatch_handler()


def _connector_sync() -> LambdaEntry:
    from ctxstore.runtime.lambda_jobs import connector_sync_handler

    return connector_sync_handler()


FUNCTIONS: dict[str, Callable[[], LambdaEntry]] = {
    "api_health": _health,
    "api_byog": _api("byog", "byog"),
    "api_connectors": _api("connectors", "connectors"),
    "api_context_ingest": _api("context_ingest", "ingest", "status"),
    "api_context_items": _api("context_items", "catalog"),
    "api_databases": _api("databases", "databases"),
    "api_graphs": _api("graphs", "graphs"),
    "api_query": _api("query", "query"),
    "api_webhooks": _api("webhooks", "webhooks"),
    "console_web": _console,
    **{f"ingest_{s}": _ingest(s) for s in ("parse", "embed", "index", "graph", "complete", "errored")},
    "ingest_starter": _ingest_starter,
    "job_worker": _job_worker,
    "webhook_dispatch": _webhook_dispatch,
    "connector_sync": _connector_sync,
}


def handler_for(name: str) -> LambdaEntry:
    """The handler of functions/<name>; raises KeyError for a name template.yaml does not use."""
    return FUNCTIONS[name]()
