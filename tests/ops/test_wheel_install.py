"""Issue 27 part 1: the product installs like software.

`uv build` makes a wheel and an sdist; the wheel goes into a fresh venv (no network: the locked dependency set
comes from uv's cache, exported from uv.lock, then the wheel itself), and that venv's `ctxstore` answers `--help`,
serves /health and the console's vendored scripts, and starts the stdio MCP server. Then `uvx` runs the MCP server
from the wheel the way a desktop agent's configuration does (README), offline: `make test` warms uv's cache with the
client side's dependencies first (the Makefile's `uvx-cache`), since resolving them needs the package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
# uv as the Makefile runs it (`python3 -m uv`: installed next to the system Python, not into the project's venv).
UV = [shutil.which("uv") or "", "--no-config"] if shutil.which("uv") else ["python3", "-m", "uv", "--no-config"]

pytestmark = pytest.mark.timeout(600)


def _run(*cmd: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(["./scripts/build-console-assets.sh"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    _run(*UV, "build", "--offline", "--out-dir", str(out))
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel with its `local` extra (what `ctxstore serve` runs on)."""
    work = tmp_path_factory.mktemp("venv")
    venv, lock = work / "venv", work / "pylock.toml"
    _run(*UV, "venv", "--offline", "--python", "3.11", "-q", str(venv))
    locked = ("export", "--frozen", "--no-dev", "--extra", "local", "--no-emit-project", "--format", "pylock.toml")
    _run(*UV, *locked, "-o", str(lock))
    python = str(venv / "bin" / "python")
    _run(*UV, "pip", "install", "--offline", "--python", python, "-r", str(lock))
    [wheel] = dist.glob("ctxstore-*-py3-none-any.whl")
    _run(*UV, "pip", "install", "--offline", "--no-deps", "--python", python, str(wheel))
    return venv


def test_build_makes_a_wheel_and_sdist_with_the_console_assets(dist: Path) -> None:
    [wheel] = dist.glob("ctxstore-*-py3-none-any.whl")
    [sdist] = dist.glob("ctxstore-*.tar.gz")
    with tarfile.open(sdist) as tar:  # a wheel built from the sdist (pip's way) gets the assets too
        assert any(name.endswith("console/static/vendor/htmx.min.js") for name in tar.getnames())
    names = set(zipfile.ZipFile(wheel).namelist())
    for asset in ("htmx.min.js", "cytoscape.min.js", "htmx.LICENSE", "cytoscape.LICENSE"):
        assert f"ctxstore/console/static/vendor/{asset}" in names
    assert "ctxstore/console/static/console.js" in names
    assert any(name.endswith("entry_points.txt") for name in names)


def test_installed_wheel_runs_help_serve_and_mcp(installed: Path, tmp_path: Path) -> None:
    ctxstore = str(installed / "bin" / "ctxstore")
    assert "serve" in _run(ctxstore, "--help", cwd=tmp_path).stdout
    # The installed package, not this checkout, is what runs.
    where = _run(str(installed / "bin" / "python"), "-c", "import ctxstore; print(ctxstore.__file__)", cwd=tmp_path)
    assert str(installed) in where.stdout

    with ServerProcess(tmp_path / "data", program=[ctxstore]) as srv:
        srv.wait_ready(timeout=180)
        assert httpx.get(srv.base_url + "/health", timeout=5).json()["status"] == "ok"
        script = httpx.get(srv.base_url + "/console/static/vendor/htmx.min.js", timeout=5)
        assert script.status_code == 200 and "htmx" in script.text[:2000]
        [key] = srv.printed_keys
        assert srv.stop() == 0

    # `ctxstore mcp` (what `uvx --from <wheel> ctxstore mcp` runs) answers an MCP initialize on stdio.
    hello = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
    )
    mcp = subprocess.run(
        [ctxstore, "--url", srv.base_url, "--api-key", key, "mcp"],
        input=hello,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert '"serverInfo"' in mcp.stdout, mcp.stderr


def test_uvx_runs_the_mcp_server_from_the_wheel_as_an_agent_configures_it(dist: Path, tmp_path: Path) -> None:
    """`uvx --from "ctxstore[client] @ file://<wheel>" ctxstore mcp` (README, docs/operations.md), in a tool dir of
    its own: uv builds a fresh environment from the wheel, and the MCP server in it reaches a real server."""
    [wheel] = dist.glob("ctxstore-*-py3-none-any.whl")
    uvx = [*UV, "tool", "run", "--offline", "--isolated", "--from", f"ctxstore[client] @ {wheel.as_uri()}"]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),  # uv's cache lives under it (warmed by `make test`)
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_PYTHON": "3.11",
        **({"UV_CACHE_DIR": os.environ["UV_CACHE_DIR"]} if "UV_CACHE_DIR" in os.environ else {}),
    }
    with ServerProcess(tmp_path / "data") as srv:
        srv.wait_ready(timeout=180)
        [key] = srv.printed_keys
        params = StdioServerParameters(
            command=uvx[0],
            args=[*uvx[1:], "ctxstore", "mcp"],
            env=env | {"CTXSTORE_URL": srv.base_url, "CTXSTORE_API_KEY": key, "CTXSTORE_DATABASE": "uvx-db"},
            cwd=str(tmp_path),
        )

        async def session() -> None:
            with anyio.fail_after(240):
                async with Client(params) as c:
                    names = {t.name for t in (await c.list_tools()).tools}
                    assert {"ctxstore_query", "ctxstore_create_database"} <= names
                    created = await c.call_tool("ctxstore_create_database", {})
                    text = "\n".join(getattr(b, "text", "") for b in created.content)
                    assert not created.is_error and text.startswith('Database "uvx-db" created'), text

        try:
            anyio.run(session)
        except Exception as exc:  # uv's own message (an uncached package, offline) is on the MCP server's stderr
            raise AssertionError(f"{exc!r}: is uv's cache warm? `make test` runs `make uvx-cache` first") from exc
        listed = httpx.get(srv.base_url + "/databases", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert "uvx-db" in listed.text
    # The environment uv built is the wheel's, not this checkout's.
    where = subprocess.run(
        [*uvx, "python", "-c", "import ctxstore; print(ctxstore.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.returncode == 0 and str(ROOT) not in where.stdout and "site-packages" in where.stdout, where
