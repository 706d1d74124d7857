"""`ctxstore doctor`: can this machine use the server? Reachability, version, key, database readiness."""

from __future__ import annotations

import time
from typing import Any

import typer

from ctxstore import API_VERSION
from ctxstore.client import CtxstoreError
from ctxstore.commands import exit_codes
from ctxstore.commands.common import DatabaseOpt, OutputOpt, connect
from ctxstore.commands.output import HINTS


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(ctx: typer.Context, database: DatabaseOpt = None, output: OutputOpt = None) -> None:
        """Check the connection step by step and say what to fix. Exit 0 when every check passes."""
        with connect(ctx, output, database) as (client, out, settings):
            checks: list[dict[str, Any]] = []

            def check(name: str, ok: bool, detail: str, fix: str = "") -> bool:
                checks.append({"check": name, "ok": ok, "detail": detail, "fix": "" if ok else fix})
                return ok

            key_src = settings.sources.get("api_key", "unset")
            check(
                "config",
                True,
                f"url {settings.url} ({settings.sources.get('url')}); key from {key_src}; "
                f"database {settings.database or '-'}",
            )
            exit_code = exit_codes.OK
            started = time.perf_counter()
            try:
                health = client.health()
                reachable = check(
                    "reachable",
                    True,
                    f"{settings.url}/health answered in {(time.perf_counter() - started) * 1000:.0f} ms",
                )
            except CtxstoreError as err:
                reachable = check("reachable", False, err.message, HINTS["UNREACHABLE"])
                health, exit_code = {}, exit_codes.UNAVAILABLE
            if reachable:
                server = str(health.get("api_version", "?"))
                check(
                    "version",
                    server.split(".")[0] == API_VERSION.split(".")[0],
                    f"server {server}, client {API_VERSION}",
                    "use a client of the same major version",
                )
                if not settings.api_key:
                    check("api key", False, "no API key configured", HINTS["UNAUTHORIZED"])
                    exit_code = exit_codes.AUTH
                else:
                    try:
                        names = client.databases.list()
                        check("api key", True, f"accepted; {len(names)} databases visible")
                    except CtxstoreError as err:
                        check("api key", False, f"{err.code}: {err.message}", HINTS.get(err.code, ""))
                        exit_code = exit_codes.for_error(err)
                db = client.database
                if db and exit_code == exit_codes.OK:
                    try:
                        st = client.databases.status(db)
                        check(
                            "database",
                            st.ready,
                            f'"{db}" is {"ready" if st.ready else st.status}',
                            "wait for provisioning, or see `ctxstore database status`",
                        )
                    except CtxstoreError as err:
                        check("database", False, f"{err.code}: {err.message}", HINTS.get(err.code, ""))
            if exit_code == exit_codes.OK and not all(c["ok"] for c in checks):
                exit_code = exit_codes.PARTIAL
            if out.json:
                out.data({"ok": exit_code == exit_codes.OK, "checks": checks})
            else:
                out.table(
                    "ctxstore doctor",
                    ["check", "", "detail", "fix"],
                    [(c["check"], "ok" if c["ok"] else "FAIL", c["detail"], c["fix"]) for c in checks],
                )
            raise typer.Exit(exit_code)
