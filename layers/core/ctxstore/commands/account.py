"""`ctxstore login`, `logout` and `config`: the connection the client verbs use."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ctxstore.commands.common import OutputOpt, Refused, guarded, options, output_for
from ctxstore.commands.output import Output
from ctxstore.commands.settings import checked_url, config_path, read_config, write_config


def _mask(key: str | None) -> str:
    if not key:
        return "-"
    parts = key.split("_")
    return f"{parts[0]}_{parts[1]}_…" if len(parts) >= 3 else key[:6] + "…"


def register(app: typer.Typer) -> None:
    @app.command()
    def login(
        ctx: typer.Context,
        url: Annotated[str | None, typer.Option(help="Server URL.")] = None,
        api_key: Annotated[str | None, typer.Option(help="API key (asked for when omitted on a terminal).")] = None,
        database: Annotated[str | None, typer.Option("--database", "-d", help="Default database.")] = None,
        collection: Annotated[str | None, typer.Option("--collection", "-c", help="Default collection.")] = None,
        verify: Annotated[bool, typer.Option(help="Check the key against the server before saving.")] = True,
        output: OutputOpt = None,
    ) -> None:
        """Save the server URL, API key and default scope (mode 0600) for the client verbs and `ctxstore mcp`."""
        out = output_for(ctx, output)
        with guarded(out):
            opts = options(ctx)
            path = config_path(opts.config)
            stored = read_config(path)
            key = api_key or opts.api_key
            if not key:
                if not sys.stdin.isatty():
                    raise Refused("no API key given", hint="pass --api-key (or run on a terminal to be asked)")
                key = typer.prompt("API key", hide_input=True)
            resolved = url and checked_url(url, "flag")[0]  # saved complete: `localhost:8080` as http://...
            values = {**stored, "url": resolved or opts.settings().url, "api_key": key}
            values.update({k: v for k, v in (("database", database), ("collection", collection)) if v is not None})
            if verify:
                from ctxstore.client import CtxstoreClient

                with CtxstoreClient(str(values["url"]), key, timeout=opts.timeout) as client:
                    client.databases.list()  # raises UNAUTHORIZED / UNREACHABLE with the documented exit code
            write_config(path, values)
            if out.json:
                out.data({"config_file": str(path), "url": values["url"], "database": values.get("database")})
            else:
                out.line(f"Saved to {path} (readable by you only).")

    @app.command()
    def logout(ctx: typer.Context) -> None:
        """Forget the saved connection (deletes the config file)."""
        path = config_path(options(ctx).config)
        path.unlink(missing_ok=True)
        Output().line(f"Removed {path}.")

    @app.command()
    def config(ctx: typer.Context, output: OutputOpt = None) -> None:
        """Show the connection the client verbs would use, and where each value comes from."""
        out = output_for(ctx, output)
        with guarded(out):
            s = options(ctx).settings()
            rows = [
                ("url", s.url, s.sources.get("url")),
                ("api_key", _mask(s.api_key), s.sources.get("api_key")),
                ("database", s.database or "-", s.sources.get("database")),
                ("collection", s.collection if s.collection is not None else "-", ""),
                ("config file", str(s.config_file), ""),
            ]
            if out.json:
                out.data({name: value for name, value, _ in rows})
            else:
                out.table(None, ["setting", "value", "from"], rows)
