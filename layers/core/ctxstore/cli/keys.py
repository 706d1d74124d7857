"""`ctxstore keys create|list|revoke`: API keys in this machine's data dir, without a running server.

`--data-dir` is accepted before or after the sub-verb (`keys --data-dir D create` and `keys create --data-dir D`):
scripts and the docs use both.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from ctxstore.cli.serve import DataDirOpt, server_settings

if TYPE_CHECKING:
    from ctxstore.services.access.keys import KeyService


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat() if ts else "never"


@contextmanager
def _keys(ctx: typer.Context, data_dir: str | None) -> Iterator[KeyService]:
    """The key service on the data dir given here or on `keys`; a refused value exits 2 with its reason."""
    from ctxstore.runtime import build_container
    from ctxstore.services.registry import build_services

    parent = ctx.parent.params.get("data_dir") if ctx.parent else None
    container = build_container(server_settings(data_dir or parent))
    try:
        yield build_services(container).keys
    except ValueError as exc:
        print(f"ctxstore: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    finally:
        container.close()


def register(app: typer.Typer) -> None:
    keys = typer.Typer(help="Manage API keys on this machine's data dir: create | list | revoke.", no_args_is_help=True)
    app.add_typer(keys, name="keys")

    @keys.callback()
    def root(data_dir: DataDirOpt = None) -> None:
        """Manage API keys on this machine's data dir (the server need not run)."""

    @keys.command()
    def create(
        ctx: typer.Context,
        org: Annotated[str, typer.Option("--org", help="Organisation the key belongs to.")],
        expires_in: Annotated[str | None, typer.Option("--expires-in", help="Lifetime such as 30d, 12h.")] = None,
        databases: Annotated[
            str | None, typer.Option("--databases", help="Comma-separated databases the key may use (default: all).")
        ] = None,
        data_dir: DataDirOpt = None,
    ) -> None:
        """Create a key; prints exactly the key."""
        from ctxstore.domain.api_keys import parse_duration

        with _keys(ctx, data_dir) as service:
            expires = parse_duration(expires_in) if expires_in else None
            dbs = [d for d in databases.split(",") if d] if databases else None
            print(service.create(org, expires_in_s=expires, databases=dbs))

    @keys.command("list")
    def list_(
        ctx: typer.Context,
        org: Annotated[str | None, typer.Option("--org", help="Only this organisation's keys.")] = None,
        data_dir: DataDirOpt = None,
    ) -> None:
        """List keys (prefixes only)."""
        with _keys(ctx, data_dir) as service:
            for k in service.list(org):
                state = "revoked" if k.revoked else "active"
                print(f"{k.prefix}\t{k.org}\t{state}\texpires={_when(k.expires_at)}\tlast_used={_when(k.last_used_at)}")

    @keys.command()
    def revoke(
        ctx: typer.Context,
        prefix: Annotated[str, typer.Argument(help="The key's prefix, as `keys list` shows it.")],
        data_dir: DataDirOpt = None,
    ) -> None:
        """Revoke a key by its prefix."""
        with _keys(ctx, data_dir) as service:
            if not service.revoke(prefix):
                print(f"ctxstore: no key with prefix {prefix}", file=sys.stderr)
                raise typer.Exit(1)
            print(f"revoked {prefix}")
