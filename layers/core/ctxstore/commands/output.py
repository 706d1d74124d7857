"""Printing for the client verbs: rich tables for people, `-o json` for scripts, errors that say what to do.

Results go to stdout; progress, warnings and errors to stderr, so `-o json` output is always clean JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Iterable, Sequence
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ctxstore.commands import exit_codes

if TYPE_CHECKING:  # rich and the client load when a verb prints, not for --help
    from rich.console import Console

    from ctxstore.client import CtxstoreError

HINTS: dict[str, str] = {
    "UNAUTHORIZED": "check the API key: --api-key, CTXSTORE_API_KEY or `ctxstore login`",
    "FORBIDDEN": "this key may not do that (a key limited to other databases, or a plan limit)",
    "DATABASE_NOT_FOUND": "see `ctxstore database list`, or create it with `ctxstore database create NAME`",
    "SOURCE_NOT_FOUND": "see `ctxstore list` for the ids in this database and collection",
    "FILE_NOT_FOUND": "the id was never ingested here, was rejected at upload, or was deleted",
    "DATABASE_ALREADY_EXISTS": "pick another name, or use the existing database",
    "UNREACHABLE": "is the server running? Start one with `ctxstore serve`, or point --url / CTXSTORE_URL at it",
    "BAD_RESPONSE": "point --url / CTXSTORE_URL at the ctxstore server's base URL (the one `ctxstore serve` prints, "
    "e.g. http://127.0.0.1:8080), not a web page or another service; `ctxstore doctor` checks it",
    "RATE_LIMITED": "the key's rate limit was hit and retries ran out; try again shortly",
    "SERVICE_UNAVAILABLE": "the server is busy or a dependency is down and retries ran out; try again shortly",
    "PROVIDER_UNAVAILABLE": "the connector's provider did not answer; try again shortly",
    "INTERNAL_ERROR": "a server bug: quote the request id to whoever runs the server",
    "PAYLOAD_TOO_LARGE": "send less per request: files up to 50 MB, JSON fields within the documented caps",
    "CONFLICT": "the item or resource is busy or in another state; check it (`ctxstore status`) and try again",
    "METHOD_NOT_ALLOWED": "the server does not offer this call: check that client and server versions match "
    "(`ctxstore doctor`)",
    "NOT_FOUND": "check the name or id, and the URL (`ctxstore doctor`)",
    "CHECK": "`ctxstore doctor` checks the connection, the key and the database step by step",
}
# When a code has no hint of its own: what to do, by the exit code the error leads to.
HINTS_BY_EXIT: dict[int, str] = {
    exit_codes.USAGE: "fix the value the message names; `ctxstore VERB --help` lists the options",
    exit_codes.AUTH: HINTS["UNAUTHORIZED"],
    exit_codes.NOT_FOUND: HINTS["NOT_FOUND"],
    exit_codes.CONFLICT: HINTS["CONFLICT"],
    exit_codes.UNAVAILABLE: "try again shortly; `ctxstore doctor` checks the connection",
    exit_codes.UNEXPECTED: HINTS["CHECK"],
}


# Columns that hold ids: never wrapped or cut, whatever the terminal width (people copy them into the next command).
WHOLE_COLUMNS = ("id", "source_id")
GAP = 2  # between two columns: one space of padding and box.SIMPLE_HEAD's blank divider
MIN_FLEX = 4  # a column that gives up width keeps at least this many characters ("ti…"), and its header


def fit_widths(columns: Sequence[str], rows: Sequence[Sequence[str]], whole: Collection[str], room: int) -> list[int]:
    """Column widths within `room` characters: columns in `whole` keep their full width; the others shrink,
    widest first, down to MIN_FLEX or their header's width (narrower than that, a terminal cannot show the table)."""
    from rich.cells import cell_len

    widths = [
        max([cell_len(name), *(cell_len(line) for r in rows for line in (r[i].splitlines() or [""]))])
        for i, name in enumerate(columns)
    ]
    floor = [min(w, max(MIN_FLEX, cell_len(name))) for w, name in zip(widths, columns, strict=True)]
    flexible = [i for i, name in enumerate(columns) if name not in whole]
    excess = sum(widths) - room
    while excess > 0:
        shrinkable = [i for i in flexible if widths[i] > floor[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


class Format(StrEnum):
    table = "table"
    json = "json"


class Output:
    def __init__(self, fmt: Format = Format.table) -> None:
        self.fmt = fmt

    # The consoles are made on first use: `-o json` writes with json.dumps and never loads rich.
    # emoji=False: stored text prints as stored (":fire:" stays ":fire:"), and rich's emoji table never loads.
    @cached_property
    def out(self) -> Console:
        from rich.console import Console

        return Console(soft_wrap=False, emoji=False)

    @cached_property
    def err(self) -> Console:
        from rich.console import Console

        return Console(stderr=True, emoji=False)

    @property
    def json(self) -> bool:
        return self.fmt is Format.json

    def data(self, value: Any) -> None:
        """A JSON document on stdout (json mode)."""
        sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def table(
        self,
        title: str | None,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        whole: Collection[str] = WHOLE_COLUMNS,
        truncate: Collection[str] = (),
    ) -> None:
        """A table that fits the terminal. Columns in `whole` (ids) keep every character on one line, so they
        can be copied; the others give up width, widest first: those in `truncate` end in "…", the rest wrap."""
        from rich import box
        from rich.table import Table

        cells = [["" if v is None else str(v) for v in r] for r in rows]
        widths = fit_widths(columns, cells, whole, self.out.width - GAP * (len(columns) - 1))
        t = Table(
            title=title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            padding=(0, 1, 0, 0),
            pad_edge=False,
            show_edge=False,
        )
        for c, width in zip(columns, widths, strict=True):
            if c in whole:
                t.add_column(c, width=width, no_wrap=True, overflow="ignore")
            elif c in truncate:
                t.add_column(c, width=width, no_wrap=True, overflow="ellipsis")
            else:
                t.add_column(c, width=width, overflow="fold")
        for r in cells:
            t.add_row(*r)
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
        code = exit_codes.for_error(err)
        hint = HINTS.get(err.code) or HINTS_BY_EXIT.get(code)
        if err.code == "INVALID_PARAMETERS" and err.status is None:
            hint = "pass -d/--database, or set CTXSTORE_DATABASE, or `ctxstore login --database NAME`"
        self.fail(err.code, message, hint=hint, extra={k: v for k, v in where.items() if v is not None})
        return code
