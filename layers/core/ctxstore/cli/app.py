"""The `ctxstore` command, one typer app: `serve` and `keys` (the server side) and the client verbs.

Start-up is kept short (`ctxstore --help` and `ctxstore query` in ≤ 0.3 s, bench/cli_startup.py): the verb
modules import only typer and the standard library at load time; the client (httpx, pydantic), rich and the
server's modules load inside the verb that uses them. Help is click's plain help: typer's rich help imports
rich's markdown and syntax modules, which alone cost more than the rest of `--help`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Annotated

import typer

from ctxstore.commands import exit_codes
from ctxstore.commands.common import GlobalOptions, OutputOpt

EPILOG = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in exit_codes.TABLE.items()) + "."

# The modules that register verbs, in the order `--help` lists them, and the verbs each registers. A command line
# naming a verb builds the app with that module alone (typer builds every registered command's parameters up
# front); `--help`, a misspelt verb or one missing here get the whole app, so they still work, only slower.
MODULES: dict[str, tuple[str, ...]] = {
    "ctxstore.cli.serve": ("serve",),
    "ctxstore.cli.keys": ("keys",),
    "ctxstore.cli.backup": ("backup", "restore"),
    "ctxstore.commands.account": ("login", "logout", "config"),
    "ctxstore.commands.context_cmds": ("query", "status", "list", "inspect", "delete", "relations", "subgraph"),
    "ctxstore.commands.ingest_cmd": ("ingest",),
    "ctxstore.commands.database_cmds": ("database",),
    "ctxstore.commands.byog_cmds": ("byog",),
    "ctxstore.commands.webhook_cmds": ("webhooks",),
    "ctxstore.commands.doctor": ("doctor",),
    "ctxstore.commands.mcp_cmd": ("mcp",),
}
VERBS = {verb: module for module, verbs in MODULES.items() for verb in verbs}
ROOT_OPTIONS_WITH_VALUE = ("--url", "--api-key", "--config", "--timeout", "--output", "-o")


def verb_of(argv: Sequence[str]) -> str | None:
    """The verb a command line names: its first argument that is neither a root option nor such an option's value."""
    args = iter(argv)
    for arg in args:
        if arg in ROOT_OPTIONS_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def build_app(verb: str | None = None) -> typer.Typer:
    """The `ctxstore` app: every verb, or only the module registering `verb` when it is a known one."""
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

    for name in [VERBS[verb]] if verb in VERBS else MODULES:
        importlib.import_module(name).register(app)
    return app


def run(argv: list[str]) -> int:
    """Run one command line; returns its exit code."""
    try:
        build_app(verb_of(argv))(args=argv, prog_name="ctxstore", standalone_mode=True)
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else exit_codes.USAGE)
    return exit_codes.OK
