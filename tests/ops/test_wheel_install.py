"""Issue 27 part 1: the product installs like software.

`uv build` makes a wheel and an sdist; the wheel goes into a fresh venv (no network: the locked dependency set
comes from uv's cache, exported from uv.lock, then the wheel itself), and that venv's `ctxstore` answers `--help`,
serves /health and the console's vendored scripts, and starts the stdio MCP server.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import httpx
import pytest

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
