"""Printing for the client verbs: rich tables for people, `-o json` for scripts, errors that say what to do.

Results go to stdout; progress, warnings and errors to stderr, so `-o json` output is always clean JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.table import Table

from ctxstore.client import CtxstoreError
from ctxstore.commands import exit_codes

HINTS: dict[str, str] = {
    "UNAUTHORIZED": "check the API key: --api-key, CTXSTORE_API_KEY or `ctxstore login`",
    "FORBIDDEN": "this key may not do that (a key limited to other databases, or a plan limit)",
    "DATABASE_NOT_FOUND": "see `ctxstore database list`, or create it with `ctxstore database create NAME`",
    "SOURCE_NOT_FOUND": "see `ctxstore list` for the ids in this database and collection",
    "FILE_NOT_FOUND": "the id was never ingested here, was rejected at upload, or was deleted",
    "DATABASE_ALREADY_EXISTS": "pick another name, or use the existing database",
    "UNREACHABLE": "is the server running? Start one with `ctxstore serve`, or point --url / CTXSTORE_URL at it",
    "RATE_LIMITED": "the key's rate limit was hit and retries ran out; try again shortly",
    "SERVICE_UNAVAILABLE": "the server is busy or a dependency is down and retries ran out; try again shortly",
    "INTERNAL_ERROR": "a server bug: quote the request id to whoever runs the server",
}


class Format(StrEnum):
    table = "table"
    json = "json"


class Output:
    def __init__(self, fmt: Format = Format.table) -> None:
        self.fmt = fmt
        self.out = Console(soft_wrap=False)
        self.err = Console(stderr=True)

    @property
    def json(self) -> bool:
        return self.fmt is Format.json

    def data(self, value: Any) -> None:
        """A JSON document on stdout (json mode)."""
        sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def table(self, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        t = Table(title=title, title_justify="left", show_lines=False)
        for c in columns:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*("" if v is None else str(v) for v in r))
        self.out.print(t)

    def line(self, text: str = "") -> None:
        self.out.print(text, highlight=False, markup=False)

    def note(self, text: str) -> None:
        """A remark for the person at the terminal (stderr; silent in json mode)."""
        if not self.json:
            self.err.print(text, highlight=False)

    def fail(self, code: str, message: str, *, hint: str | None = None, extra: dict[str, Any] | None = None) -> None:
        if self.json:
            body = {"error": {"code": code, "message": message, **(extra or {})}}
            if hint:
                body["error"]["hint"] = hint
            sys.stderr.write(json.dumps(body) + "\n")
            return
        self.err.print(f"[bold red]Error[/]: {code}: {message}", highlight=False, markup=True)
        if hint:
            self.err.print(f"[yellow]Hint[/]: {hint}", highlight=False, markup=True)

    def api_error(self, err: CtxstoreError) -> int:
        where = {"status": err.status, "request_id": err.request_id}
        detail = ", ".join(f"{k} {v}" for k, v in (("HTTP", err.status), ("request", err.request_id)) if v)
        message = f"{err.message} ({detail})" if detail and not self.json else err.message
        hint = HINTS.get(err.code)
        if err.code == "INVALID_PARAMETERS" and err.status is None:
            hint = "pass -d/--database, or set CTXSTORE_DATABASE, or `ctxstore login --database NAME`"
        self.fail(err.code, message, hint=hint, extra={k: v for k, v in where.items() if v is not None})
        return exit_codes.for_error(err)
