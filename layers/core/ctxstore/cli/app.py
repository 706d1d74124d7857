"""The `ctxstore` command, one typer app: `serve` and `keys` (the server side) and the client verbs.

Start-up is kept short (`ctxstore --help` and `ctxstore query` in ≤ 0.3 s, bench/cli_startup.py): the verb
modules import only typer and the standard library at load time; the client (httpx, pydantic), rich and the
server's modules load inside the verb that uses them. Help is click's plain help: typer's rich help imports
rich's markdown and syntax modules, which alone cost more than the rest of `--help`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ctxstore.cli import keys, serve
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

EPILOG = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in exit_codes.TABLE.items()) + "."


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="ctxstore",
        help="Context store for AI applications: run the server, or use one as a client.",
        epilog=EPILOG,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
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

    verbs = (serve, keys, account, context_cmds, ingest_cmd, database_cmds, byog_cmds, webhook_cmds, doctor)
    for module in (*verbs, mcp_cmd):
        module.register(app)
    return app


def run(argv: list[str]) -> int:
    """Run one command line; returns its exit code."""
    try:
        build_app()(args=argv, prog_name="ctxstore", standalone_mode=True)
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else exit_codes.USAGE)
    return exit_codes.OK
