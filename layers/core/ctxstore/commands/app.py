"""The `ctxstore` command: `serve` and `keys` (the server side, unchanged) and the client verbs (typer + rich)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from ctxstore.commands import (
    account,
    byog_cmds,
    context_cmds,
    database_cmds,
    doctor,
    exit_codes,
    ingest_cmd,
    mcp_cmd,
    webhook_cmds,
)
from ctxstore.commands.common import GlobalOptions, OutputOpt

ServerMain = Callable[[list[str]], int]

EPILOG = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in exit_codes.TABLE.items()) + "."
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def build_app(server_main: ServerMain) -> typer.Typer:
    app = typer.Typer(
        name="ctxstore",
        help="Context store for AI applications: run the server, or use one as a client.",
        epilog=EPILOG,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def root(
        ctx: typer.Context,
        url: Annotated[
            str | None, typer.Option(help="Server URL (env CTXSTORE_URL; default http://127.0.0.1:8080).")
        ] = None,
        api_key: Annotated[str | None, typer.Option(help="API key (env CTXSTORE_API_KEY).")] = None,
        config: Annotated[
            str | None, typer.Option(help="Config file (env CTXSTORE_CONFIG; default ~/.config/ctxstore/config.json).")
        ] = None,
        timeout: Annotated[float, typer.Option(help="Seconds to wait for one HTTP answer.")] = 60.0,
        output: OutputOpt = None,
    ) -> None:
        ctx.obj = GlobalOptions(url=url, api_key=api_key, config=config, timeout=timeout, output=output)

    @app.command(context_settings=PASS_THROUGH, add_help_option=False)
    def serve(ctx: typer.Context) -> None:
        """Run the API, MCP endpoint, workers and scheduler on the embedded backends (`serve --help`)."""
        raise typer.Exit(server_main(["serve", *ctx.args]))

    @app.command(context_settings=PASS_THROUGH, add_help_option=False)
    def keys(ctx: typer.Context) -> None:
        """Manage API keys on this machine's data dir: create | list | revoke (`keys --help`)."""
        raise typer.Exit(server_main(["keys", *ctx.args]))

    for module in (account, context_cmds, ingest_cmd, database_cmds, byog_cmds, webhook_cmds, doctor, mcp_cmd):
        module.register(app)
    return app


def run(argv: list[str], server_main: ServerMain) -> int:
    """Run one command line; returns its exit code."""
    try:
        build_app(server_main)(args=argv, prog_name="ctxstore", standalone_mode=True)
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else exit_codes.USAGE)
    return exit_codes.OK
