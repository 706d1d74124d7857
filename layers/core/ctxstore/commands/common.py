"""What every client verb shares: its options, the connection, and turning failures into exit codes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from ctxstore.commands import exit_codes
from ctxstore.commands.output import HINTS, Format, Output
from ctxstore.commands.settings import Settings, resolve

if TYPE_CHECKING:
    from ctxstore.client import CtxstoreClient


class StoreKind(StrEnum):
    knowledge = "knowledge"
    memory = "memory"


DatabaseOpt = Annotated[
    str | None,
    typer.Option(
        "--database", "-d", help="Database to use (default: CTXSTORE_DATABASE or `ctxstore login --database`)."
    ),
]
CollectionOpt = Annotated[
    str | None,
    typer.Option("--collection", "-c", help="Collection inside the database (default: the database's default one)."),
]
OutputOpt = Annotated[
    Format | None, typer.Option("--output", "-o", help="table for people (default), json for scripts.")
]
KindOpt = Annotated[StoreKind, typer.Option("--type", "-t", help="Store holding the items: knowledge or memory.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking (required when not on a terminal).")]


@dataclass
class GlobalOptions:
    """The root options (`ctxstore --url ... VERB`), resolved with env and config file when a verb connects."""

    url: str | None = None
    api_key: str | None = None
    config: str | None = None
    timeout: float = 60.0
    output: Format | None = None

    def settings(self) -> Settings:
        return resolve(url=self.url, api_key=self.api_key, config=self.config, timeout=self.timeout)


class Refused(Exception):
    """A verb's own refusal (bad input file, missing confirmation): printed with a hint, then `exit_code`."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "INVALID_PARAMETERS",
        hint: str | None = None,
        exit_code: int = exit_codes.USAGE,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint
        self.exit_code = exit_code


def options(ctx: typer.Context) -> GlobalOptions:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, GlobalOptions) else GlobalOptions()


@contextmanager
def guarded(out: Output) -> Iterator[None]:
    """Print a failure the way `out` prints and leave with its exit code."""
    from ctxstore.client import CtxstoreError  # the client loads when a verb runs, not for --help

    try:
        yield
    except CtxstoreError as err:
        raise typer.Exit(out.api_error(err)) from None
    except Refused as refused:
        out.fail(refused.code, str(refused), hint=refused.hint)
        raise typer.Exit(refused.exit_code) from None
    except ValueError as exc:  # an unreadable config file, a malformed URL
        out.fail("INVALID_PARAMETERS", str(exc), hint=getattr(exc, "hint", None) or HINTS["CHECK"])
        raise typer.Exit(exit_codes.USAGE) from None


def output_for(ctx: typer.Context, fmt: Format | None) -> Output:
    """The verb's `-o`, else the root's (`ctxstore -o json VERB`), else tables."""
    return Output(fmt or options(ctx).output or Format.table)


@contextmanager
def connect(
    ctx: typer.Context, fmt: Format | None, database: str | None = None, collection: str | None = None
) -> Iterator[tuple[CtxstoreClient, Output, Settings]]:
    """A client for this verb, with failures turned into a printed error and the documented exit code."""
    out = output_for(ctx, fmt)
    with guarded(out):
        settings = options(ctx).settings()
        if note := settings.url_note():
            out.note(note)
        client = settings.client(database, collection)
        try:
            yield client, out, settings
        finally:
            client.close()


def confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise Refused(f"{question} needs confirmation", hint="pass --yes to confirm when not on a terminal")
    if not typer.confirm(question, default=False):
        raise Refused("cancelled", code="CANCELLED", exit_code=exit_codes.USAGE)


def need_database(client: CtxstoreClient, name: str | None) -> str:
    db = name or client.database
    if not db:
        raise Refused(
            "no database given",
            hint="pass a NAME or -d/--database, or set CTXSTORE_DATABASE / `ctxstore login --database`",
        )
    return db
