"""The `ctxstore` command (`python -m ctxstore.cli` works too): one typer app, assembled in `app`.

`serve` runs the whole service locally and `keys` manages API keys on this machine (`serve`, `keys`: the only
modules that reach the server's code, inside the verb); every other verb is a client of a running server
(`ctxstore.commands`, which an import contract keeps off the server's code).
"""

from __future__ import annotations

import sys


def skip_httpx_command_line() -> None:
    """httpx imports its own command line (click, pygments, rich.syntax, rich.progress) whenever those packages are
    installed, as they are here: about a quarter of a client verb's start-up. ctxstore never runs `httpx.main`, so the
    import is refused and httpx falls back to its stub (its `except ImportError` branch)."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    from ctxstore.cli.app import run

    skip_httpx_command_line()

    return run(sys.argv[1:] if argv is None else argv)
