"""ctxstore command line: `serve` runs the whole service locally; `keys` manages API keys; every other verb is a
client of a running server (`ctxstore.commands`, typer + rich)."""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # the server's modules load only for `serve` and `keys`: `--help` and client verbs stay quick
    from ctxstore.config import Settings


def _settings(args: argparse.Namespace) -> Settings:
    from ctxstore.config import Settings

    overrides: dict[str, object] = {}
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = Path(args.data_dir)
    for name in ("host", "port"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    if getattr(args, "allow_private_webhooks", False):
        overrides["allow_private_webhooks"] = True
    return Settings(**overrides)  # type: ignore[arg-type]


def _lock_data_dir(data_dir: Path) -> IO[str]:
    data_dir.mkdir(parents=True, exist_ok=True)
    fh = (data_dir / "serve.lock").open("w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"ctxstore: another server is already using {data_dir}")
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ctxstore.http.app import create_app
    from ctxstore.pipeline.connector_scheduler import SchedulerLoop
    from ctxstore.pipeline.jobs import connector_spec, queue_specs
    from ctxstore.pipeline.local_runner import LocalRunner
    from ctxstore.runtime import build_container
    from ctxstore.runtime.local import local_work_signal, recover_local
    from ctxstore.services.registry import build_services

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = _settings(args)
    lock = _lock_data_dir(settings.data_dir)
    container = build_container(settings)
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
        container.queue, [connector_spec(connectors)], threads=settings.connector_workers, wake=wake
    )
    sync_runner.start()
    scheduler = SchedulerLoop(connectors.scheduling, tick_s=settings.connector_tick_s)
    scheduler.start()
    app = create_app(services)
    # Keep-alive well past clients' own idle expiry (httpx: 5 s): uvicorn's 5 s default closed connections
    # while an overloaded loop had not yet read the next request on them, and clients saw no answer at all.
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        timeout_graceful_shutdown=10,
        timeout_keep_alive=75,
        backlog=4096,
    )
    server = uvicorn.Server(config)
    # uvicorn re-raises the signal after its graceful shutdown; these handlers absorb it so the
    # workers and stores below are closed in order and the process exits 0.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: None)
    try:
        server.run()  # handles SIGINT/SIGTERM with a graceful shutdown
    finally:
        scheduler.stop()
        connectors.stop()  # wakes provider waits so the sync runner can stop
        sync_runner.stop()
        runner.stop()
        container.close()
        lock.close()
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from ctxstore.domain.api_keys import parse_duration
    from ctxstore.runtime import build_container
    from ctxstore.services.registry import build_services

    container = build_container(_settings(args))
    keys = build_services(container).keys
    try:
        if args.keys_cmd == "create":
            expires = parse_duration(args.expires_in) if args.expires_in else None
            dbs = [d for d in args.databases.split(",") if d] if args.databases else None
            print(keys.create(args.org, expires_in_s=expires, databases=dbs))
        elif args.keys_cmd == "list":
            for k in keys.list(args.org):
                exp = datetime.fromtimestamp(k.expires_at, UTC).isoformat() if k.expires_at else "never"
                state = "revoked" if k.revoked else "active"
                used = datetime.fromtimestamp(k.last_used_at, UTC).isoformat() if k.last_used_at else "never"
                print(f"{k.prefix}\t{k.org}\t{state}\texpires={exp}\tlast_used={used}")
        elif args.keys_cmd == "revoke":
            if not keys.revoke(args.prefix):
                print(f"ctxstore: no key with prefix {args.prefix}", file=sys.stderr)
                return 1
            print(f"revoked {args.prefix}")
    except ValueError as exc:
        print(f"ctxstore: {exc}", file=sys.stderr)
        return 2
    finally:
        container.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ctxstore", description="Context store for AI applications")
    sub = p.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="run the API, workers and scheduler on the embedded backends")
    serve.add_argument("--data-dir", help="data directory (default ./.ctxstore or CTXSTORE_DATA_DIR)")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument(
        "--allow-private-webhooks",
        action="store_true",
        help="let webhooks target loopback/private addresses (tests, local receivers)",
    )
    serve.set_defaults(func=cmd_serve)

    keys = sub.add_parser("keys", help="manage API keys")
    keys.add_argument("--data-dir")
    ksub = keys.add_subparsers(dest="keys_cmd", required=True)
    create = ksub.add_parser("create", help="create a key; prints exactly the key")
    create.add_argument("--org", required=True)
    create.add_argument("--expires-in", help="lifetime such as 30d, 12h")
    create.add_argument("--databases", help="comma-separated databases the key may use (default: all)")
    lst = ksub.add_parser("list", help="list keys (prefixes only)")
    lst.add_argument("--org")
    revoke = ksub.add_parser("revoke", help="revoke a key by its prefix")
    revoke.add_argument("prefix")
    for sp in (create, lst, revoke):
        sp.add_argument("--data-dir", dest="data_dir_sub")
    keys.set_defaults(func=cmd_keys)
    return p


def server_main(argv: list[str]) -> int:
    """`serve` and `keys`, parsed here exactly as before the client verbs existed."""
    args = build_parser().parse_args(argv)
    if getattr(args, "data_dir_sub", None):
        args.data_dir = args.data_dir_sub
    return int(args.func(args))


SERVER_VERBS = ("serve", "keys")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SERVER_VERBS:
        return server_main(argv)
    from ctxstore.commands.app import run  # the client verbs; `serve` never loads them

    return run(argv, server_main)


if __name__ == "__main__":
    raise SystemExit(main())
