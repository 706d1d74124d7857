"""The client verbs start without the server's code: `ctxstore --help`, `ctxstore query --help` and a real
`ctxstore query` load neither ctxstore's server modules nor numpy/FastAPI, and `--help` not even the HTTP client
or rich. Each command runs in a fresh interpreter, as a user runs it; the modules it loaded are read from there.
(The times themselves are measured by bench/cli_startup.py.)"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer.main

from ctxstore.cli.app import MODULES, VERBS, build_app, verb_of
from ctxstore.commands.settings import Settings
from tests.agent.conftest import Served

SERVER_CODE = (
    "ctxstore.services",
    "ctxstore.adapters",
    "ctxstore.connectors",
    "ctxstore.runtime",
    "ctxstore.http",
    "ctxstore.pipeline",
    "ctxstore.retrieval",
    "ctxstore.parsing",
    "ctxstore.console",
    "ctxstore.config",
    "fastapi",
    "starlette",
    "uvicorn",
    "numpy",
    "boto3",
)
CLIENT_CODE = ("ctxstore.client", "httpx", "rich", "tenacity")

# Runs `ctxstore ARGS...` through the real entry point, then writes its exit code and the modules it imported to
# a file (stdout and stderr belong to the command; a None entry in sys.modules is an import refused, not loaded).
PROBE = """
import json, sys
from ctxstore.cli import main
report, args = sys.argv[1], sys.argv[2:]
code = main(args)
with open(report, "w") as fh:
    json.dump({"code": code, "modules": sorted(k for k, v in sys.modules.items() if v is not None)}, fh)
"""


def loaded(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    report = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", PROBE, str(report), *args], capture_output=True, env=env, timeout=120)
    found: dict[str, Any] = json.loads(report.read_text())
    return found["code"], set(found["modules"])


def under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_help_loads_neither_server_nor_client_code(tmp_path: Path) -> None:
    code, modules = loaded(tmp_path, "--help")
    assert code == 0
    assert under(modules, SERVER_CODE) == []
    assert under(modules, CLIENT_CODE) == []
    assert "ctxstore.cli.app" in modules  # the probe ran the real command


def test_query_help_loads_no_server_code_and_no_http_client(tmp_path: Path) -> None:
    code, modules = loaded(tmp_path, "query", "--help")
    assert code == 0
    assert under(modules, SERVER_CODE) == []
    assert under(modules, CLIENT_CODE) == []


def test_a_real_query_loads_the_client_but_no_server_code(served: Served, tmp_path: Path) -> None:
    db = served.ready_database("startup")
    env = {"PATH": "/usr/bin:/bin", "CTXSTORE_CONFIG": str(tmp_path / "none.json"), "COLUMNS": "120"}
    code, modules = loaded(
        tmp_path, "--url", served.url, "--api-key", served.key, "query", "-d", db, "anything", "-o", "json", env=env
    )
    assert code == 0
    assert under(modules, SERVER_CODE) == []
    assert {"ctxstore.client", "httpx"} <= modules
    # httpx's own command line (click, pygments) is skipped: ctxstore.cli.skip_httpx_command_line
    assert under(modules, ("pygments", "click")) == []
    assert under(modules, ("rich",)) == []  # `-o json` prints with json.dumps: rich's consoles are made on first use


def test_serve_and_keys_still_load_the_server(tmp_path: Path) -> None:
    """The other side of the split: `keys` builds the services on the data dir (exit code and output as before)."""
    code, modules = loaded(tmp_path, "keys", "--data-dir", str(tmp_path / "d"), "list", "--org", "nobody")
    assert code == 0
    assert {"ctxstore.runtime", "ctxstore.services.access.keys"} <= modules


def test_every_verb_is_in_the_table_that_loads_it_alone() -> None:
    """A verb missing from MODULES would still run, through the whole app: slowly. The table must be complete."""
    everything = typer.main.get_group(build_app())
    assert sorted(everything.commands) == sorted(VERBS)
    for module, verbs in MODULES.items():
        alone = typer.main.get_group(build_app(verbs[0]))
        assert sorted(alone.commands) == sorted(verbs), module


def test_the_verb_is_found_past_root_options_and_their_values() -> None:
    assert verb_of(["query", "list"]) == "query"
    assert verb_of(["--url", "http://h:1", "-o", "json", "--timeout", "5", "status", "x"]) == "status"
    assert verb_of(["--api-key", "serve", "list"]) == "list"  # an option's value is never the verb
    assert verb_of(["--url=http://h:1", "doctor"]) == "doctor"
    assert verb_of(["--help"]) is None and verb_of([]) is None


def test_only_plain_http_servers_skip_the_ca_bundle() -> None:
    """https:// keeps the client's own transport (httpx's verified default); http:// gets one without certificates,
    whose TLS, were it ever used, refuses every certificate."""
    assert Settings(url="https://ctxstore.example.com").plain_http_transport() is None
    transport = Settings(url="http://127.0.0.1:1", api_key="csk_x").plain_http_transport()
    assert transport is not None
    try:
        assert transport.base_url == "http://127.0.0.1:1"
        # httpx keeps the context in its connection pool (httpx 0.28 / httpcore 1.0 attribute names)
        context = transport._http._transport._pool._ssl_context  # type: ignore[attr-defined]
        assert isinstance(context, ssl.SSLContext)
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert context.cert_store_stats()["x509_ca"] == 0  # the CA bundle was not read
    finally:
        transport.close()
