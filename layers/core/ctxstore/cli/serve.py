"""`ctxstore serve`: the API, MCP endpoint, workers and scheduler on the embedded backends, in this process.

The server's modules (the composition root, FastAPI, uvicorn, numpy, every service) load inside the verb, so
`ctxstore --help` and the client verbs never pay for them (tests/agent/test_cli_startup.py holds that).
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ctxstore.config import Settings

DataDirOpt = Annotated[
    str | None, typer.Option("--data-dir", help="Data directory (default ./.ctxstore or CTXSTORE_DATA_DIR).")
]


def server_settings(
    data_dir: str | None,
    *,
    host: str | None = None,
    port: int | None = None,
    allow_private_webhooks: bool = False,
    log_format: str | None = None,
) -> Settings:
    """The server's settings (environment and defaults), with the flags given on the command line on top."""
    from ctxstore.config import Settings

    overrides: dict[str, object] = {}
    if data_dir:
        overrides["data_dir"] = Path(data_dir)
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if allow_private_webhooks:
        overrides["allow_private_webhooks"] = True
    if log_format is not None:
        overrides["log_format"] = log_format
    return Settings(**overrides)  # type: ignore[arg-type]


def _lock_data_dir(data_dir: Path) -> IO[str]:
    """One server per data dir: a second one would share its SQLite files and job queue."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fh = (data_dir / "serve.lock").open("w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"ctxstore: another server is already using {data_dir}", file=sys.stderr)
        raise typer.Exit(1) from None
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


def _warn_missing_optional_parts() -> None:
    """Optional system programs the server degrades without: say so at start, not at the first failing item."""
    from ctxstore.parsing.image_ocr import OCR_UNAVAILABLE, ocr_available

    if not ocr_available():
        logging.getLogger("ctxstore").warning(
            "OCR unavailable: tesseract is not installed (apt install tesseract-ocr); images and scanned PDF pages "
            "will end errored with %s",
            OCR_UNAVAILABLE,
        )


def run_server(settings: Settings) -> int:
    from ctxstore.observability import json_log
    from ctxstore.runtime import build_container
    from ctxstore.runtime.local import DataDirTooNew, local_work_signal, recover_local
    from ctxstore.runtime.observability import start_observability

    from .serve_shutdown import DrainingServer, ShutdownPlan, exit_without_teardown, watchdog

    json_log.configure(settings.log_format)
    _warn_missing_optional_parts()
    lock = _lock_data_dir(settings.data_dir)
    try:
        container = build_container(settings)
    except DataDirTooNew as exc:  # a newer release's data dir: say which versions, open nothing
        print(f"ctxstore: {exc}", file=sys.stderr)
        lock.close()
        raise typer.Exit(1) from None
    # The warm-up starts first (the graph engine loads in its own process, the vectors and the model on threads)
    # and runs while the web and pipeline modules import: a restart waits for the slower of the two, not both.
    observed = start_observability(settings, container)  # before the workers: their steps are measured
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from ctxstore.http.app import create_app
    from ctxstore.pipeline.connector_scheduler import SchedulerLoop
    from ctxstore.pipeline.jobs import connector_spec, queue_specs
    from ctxstore.pipeline.local_runner import LocalRunner
    from ctxstore.services.registry import build_services

    services = build_services(container)
    first_key = services.keys.bootstrap_default()
    if first_key:
        print("ctxstore: created organisation 'default'. Its API key, shown only this once:", flush=True)
        print(first_key, flush=True)
    released = recover_local(container)
    if released:
        logging.getLogger("ctxstore").info("re-queued %d jobs a previous run was holding", released)
    services.databases.recover()
    wake = local_work_signal(container)
    runner = LocalRunner(
        container.queue, queue_specs(services, threads=settings.workers), threads=settings.workers, wake=wake
    )
    runner.start()
    # Connector syncs: their own runner (a long chunk never holds an ingestion worker) and the scheduler
    # thread that queues due syncs from the persisted next_sync_at.
    connectors = services.connectors
    assert connectors is not None
    sync_runner = LocalRunner(
        container.queue, [connector_spec(connectors)], threads=settings.connectors.workers, wake=wake
    )
    sync_runner.start()
    scheduler = SchedulerLoop(connectors.scheduling, tick_s=settings.connectors.tick_s)
    scheduler.start()
    app = create_app(services, observability=observed.observability)
    # Keep-alive well past clients' own idle expiry (httpx: 5 s): uvicorn's 5 s default closed connections
    # while an overloaded loop had not yet read the next request on them, and clients saw no answer at all.
    json_lines = settings.log_format == "json"
    plan = ShutdownPlan(settings.shutdown_timeout_s)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        timeout_graceful_shutdown=plan.http_s,
        timeout_keep_alive=75,
        backlog=4096,
        # JSON lines: uvicorn's loggers propagate to ours; our access line (with the request id) replaces its.
        log_config=None if json_lines else LOGGING_CONFIG,
        access_log=not json_lines,
    )

    def begin_drain() -> None:  # at the signal: no new syncs or jobs; the held ones finish meanwhile
        scheduler.request_stop()
        connectors.stop()  # wakes provider waits so a sync chunk ends early
        sync_runner.request_stop()
        runner.request_stop()

    server = DrainingServer(config, begin_drain)
    # uvicorn re-raises the signal after its graceful shutdown; these handlers absorb it so the
    # workers and stores below are closed in order and the process exits 0.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: None)
    clean_exit: threading.Event | None = None
    try:
        server.run()  # handles SIGINT/SIGTERM with a graceful shutdown (requests in flight finish)
    finally:
        started = server.stopping_since or time.monotonic()
        clean_exit = watchdog(plan, started)
        begin_drain()
        scheduler.stop(plan.workers_left(started))
        released = sync_runner.stop(plan.workers_left(started)) + runner.stop(plan.workers_left(started))
        warmed = observed.wait_warmed(plan.workers_left(started))
        observed.close()
        container.close()
        lock.close()
        clean_exit.set()
        logging.getLogger("ctxstore").info("stopped in %.1fs", time.monotonic() - started)
        if released or not warmed:
            # A released job's worker (its job is back in the queue), or the warm-up still loading the model, may be
            # inside the embedding model's native threads, which abort the interpreter's teardown: leave without one.
            exit_without_teardown(0)
    return 0


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        data_dir: DataDirOpt = None,
        host: Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1).")] = None,
        port: Annotated[int | None, typer.Option(help="Port to listen on (default 8080).")] = None,
        allow_private_webhooks: Annotated[
            bool,
            typer.Option(
                "--allow-private-webhooks", help="Let webhooks reach loopback/private addresses (tests, local hooks)."
            ),
        ] = False,
        log_format: Annotated[
            str | None,
            typer.Option("--log-format", help="Log lines as 'text' (default) or 'json' (one object per line)."),
        ] = None,
        backup_dir: Annotated[
            str | None, typer.Option(help="On SIGUSR1, back up the data dir into a new folder in this directory.")
        ] = None,
    ) -> None:
        """Run the API, MCP endpoint, workers and scheduler on the embedded backends."""
        settings = server_settings(
            data_dir, host=host, port=port, allow_private_webhooks=allow_private_webhooks, log_format=log_format
        )
        if backup_dir:
            from ctxstore.cli.backup import backup_on_signal

            backup_on_signal(settings.data_dir, Path(backup_dir))
        raise typer.Exit(run_server(settings))
