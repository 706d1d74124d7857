"""`ctxstore doctor`: can this machine use the server? The URL, reachability, version, key, database readiness;
and which optional parts `ctxstore serve` would use here are present (tesseract, the graph engine, models).

Each check passes (`ok`), fails (`FAIL`, with the fix) or names the `next` step of a setup that is fine so
far (no database yet is where every newcomer starts, not a failure).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from ctxstore import API_VERSION
from ctxstore.commands import exit_codes
from ctxstore.commands.common import DatabaseOpt, OutputOpt, guarded, options, output_for
from ctxstore.commands.output import HINTS, Output
from ctxstore.commands.settings import SettingError, Settings

if TYPE_CHECKING:
    from ctxstore.client import CtxstoreClient

OK, FAIL, NEXT = "ok", "FAIL", "next"
MISSING = "missing"  # an optional part of this machine: a degradation to know of, not a failure


@dataclass
class Report:
    checks: list[dict[str, Any]] = field(default_factory=list)
    # This machine's optional parts for `ctxstore serve`: listed apart, a missing one is no failed check.
    parts: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = exit_codes.OK

    def add(self, name: str, state: str, detail: str, fix: str = "", *, exit_code: int | None = None) -> None:
        self.checks.append(
            {"check": name, "ok": state != FAIL, "state": state, "detail": detail, "fix": "" if state == OK else fix}
        )
        if state == FAIL and self.exit_code == exit_codes.OK:
            self.exit_code = exit_code if exit_code is not None else exit_codes.PARTIAL

    @property
    def failed(self) -> bool:
        return self.exit_code != exit_codes.OK

    def show(self, out: Output) -> None:
        if out.json:
            out.data({"ok": not self.failed, "checks": self.checks, "optional_parts": self.parts})
            return
        out.table(
            "ctxstore doctor",
            ["check", "", "detail", "fix / next step"],
            [(c["check"], c["state"], c["detail"], c["fix"]) for c in self.checks],
        )
        if self.parts:
            out.table(
                "this machine, for `ctxstore serve`",
                ["part", "", "detail", "fix"],
                [(p["part"], p["state"], p["detail"], p["fix"]) for p in self.parts],
            )


def _config(report: Report, settings: Settings) -> None:
    url_from = settings.sources.get("url", "default")
    assumed = "; http:// assumed" if settings.scheme_assumed else ""
    report.add(
        "config",
        OK,
        f"url {settings.url} (from {url_from}{assumed}); key from {settings.sources.get('api_key', 'unset')}; "
        f"database {settings.database or '-'}",
    )


def _reachable(report: Report, client: CtxstoreClient, url: str) -> dict[str, Any] | None:
    from ctxstore.client import CtxstoreError

    started = time.perf_counter()
    try:
        health = client.health()
    except CtxstoreError as err:
        report.add(
            "reachable", FAIL, err.message, HINTS.get(err.code, HINTS["CHECK"]), exit_code=exit_codes.UNAVAILABLE
        )
        return None
    if not isinstance(health, dict) or "api_version" not in health:
        report.add(
            "reachable",
            FAIL,
            f"this does not look like a ctxstore server: {url}/health answered without ctxstore's health fields",
            HINTS["BAD_RESPONSE"],
            exit_code=exit_codes.UNAVAILABLE,
        )
        return None
    report.add("reachable", OK, f"{url}/health answered in {(time.perf_counter() - started) * 1000:.0f} ms")
    return health


def _database(report: Report, client: CtxstoreClient, visible: list[str]) -> None:
    db = client.database
    if not db:
        if visible:
            shown = ", ".join(visible[:5]) + (", …" if len(visible) > 5 else "")
            report.add(
                "database",
                NEXT,
                f"none chosen; this key sees {shown}",
                "pick one: -d NAME, CTXSTORE_DATABASE, or `ctxstore login --database NAME`",
            )
        else:
            report.add(
                "database",
                NEXT,
                "none yet",
                "create one: `ctxstore database create NAME`, then `ctxstore login --database NAME` (or -d NAME)",
            )
        return
    from ctxstore.client import CtxstoreError

    try:
        st = client.databases.status(db)
    except CtxstoreError as err:
        if err.code == "DATABASE_NOT_FOUND":
            report.add("database", NEXT, f'"{db}" does not exist yet', f"create it: `ctxstore database create {db}`")
        else:
            report.add("database", FAIL, f"{err.code}: {err.message}", HINTS.get(err.code, HINTS["CHECK"]))
        return
    report.add(
        "database",
        OK if st.ready else FAIL,
        f'"{db}" is {"ready" if st.ready else st.status}',
        "wait for provisioning, or see `ctxstore database status`",
    )


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(ctx: typer.Context, database: DatabaseOpt = None, output: OutputOpt = None) -> None:
        """Check the connection step by step and say what to fix or do next. Exit 0 when no check fails."""
        out = output_for(ctx, output)
        report = Report()
        with guarded(out):
            try:
                settings = options(ctx).settings()
            except SettingError as bad:
                report.add("config", FAIL, str(bad), bad.hint, exit_code=exit_codes.USAGE)
                report.show(out)
                raise typer.Exit(report.exit_code) from None
            _config(report, settings)
            with settings.client(database) as client:
                health = _reachable(report, client, settings.url)
                if health is not None:
                    server = str(health.get("api_version", "?"))
                    report.add(
                        "version",
                        OK if server.split(".")[0] == API_VERSION.split(".")[0] else FAIL,
                        f"server {server}, client {API_VERSION}",
                        "use a client of the same major version",
                    )
                    _key_and_database(report, client, settings)
            _optional_parts(report)
        report.show(out)
        raise typer.Exit(report.exit_code)


def _optional_parts(report: Report) -> None:
    from ctxstore.commands.optional_parts import check_parts

    for part, found in check_parts():
        report.parts.append(
            {"part": part.name, "state": OK, "detail": f"found: {found}", "fix": ""}
            if found
            else {"part": part.name, "state": MISSING, "detail": f"not found: {part.without}", "fix": part.fix}
        )


def _key_and_database(report: Report, client: CtxstoreClient, settings: Settings) -> None:
    if not settings.api_key:
        report.add("api key", FAIL, "no API key configured", HINTS["UNAUTHORIZED"], exit_code=exit_codes.AUTH)
        return
    from ctxstore.client import CtxstoreError

    try:
        names = client.databases.list()
    except CtxstoreError as err:
        report.add(
            "api key",
            FAIL,
            f"{err.code}: {err.message}",
            HINTS.get(err.code, HINTS["CHECK"]),
            exit_code=exit_codes.for_error(err),
        )
        return
    report.add("api key", OK, f"accepted; {len(names)} databases visible")
    _database(report, client, names)
