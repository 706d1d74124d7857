"""Running the `ctxstore` command against a live server: in-process (typer's runner) or as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ctxstore.cli.app import build_app


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def env_for(url: str, key: str, config: Path, **extra: str) -> dict[str, str]:
    return {
        "CTXSTORE_URL": url,
        "CTXSTORE_API_KEY": key,
        "CTXSTORE_CONFIG": str(config),
        "CTXSTORE_DATABASE": "",
        "CTXSTORE_COLLECTION": "",
        "COLUMNS": "200",
        **extra,
    }


def cli(env: dict[str, str], *args: str, stdin: str | None = None) -> Ran:
    """One command line in this process, with `env` as its environment (empty values are unset)."""
    runner = CliRunner()
    clean = {k: (v or None) for k, v in env.items()}
    result = runner.invoke(build_app(), list(args), env=clean, input=stdin, prog_name="ctxstore")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


def cli_process(env: dict[str, str], *args: str, timeout: float = 300) -> Ran:
    """The same as a user runs it: `python -m ctxstore.cli ...` in its own process."""
    full = {**os.environ, **{k: v for k, v in env.items() if v}}
    for k, v in env.items():
        if not v:
            full.pop(k, None)
    done = subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", *args], capture_output=True, text=True, env=full, timeout=timeout
    )
    return Ran(done.returncode, done.stdout, done.stderr)
