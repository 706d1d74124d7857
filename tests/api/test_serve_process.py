"""`ctxstore serve` as a real process: first key, HTTP, clean shutdown, restart, keys CLI."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.server import ServerProcess


def _wait_ready_db(client, name: str, timeout: float = 10) -> dict:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        data = client.get("/databases/status", params={"database": name}).json()["data"]
        if data["infra"]["ready_for_ingestion"]:
            return data  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise TimeoutError(name)


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", "keys", "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_first_key_http_shutdown_and_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        with srv.client(key) as c:
            assert c.get("/health").json()["status"] == "ok"
            r = c.post("/databases", json={"database": "acme"})
            assert r.status_code == 202 and r.json()["success"] is True
            assert _wait_ready_db(c, "acme")["database"] == "acme"
            assert c.get("/openapi.json").status_code == 200
        assert srv.stop(signal.SIGTERM) == 0
        assert any("Shutting down" in line or "Finished server process" in line for line in srv.lines)

    with ServerProcess(data) as srv2:
        srv2.wait_ready()
        assert srv2.printed_keys == []  # the first key is printed once, on the first start only
        with srv2.client(key) as c:
            assert c.get("/databases").json()["data"]["databases"] == ["acme"]
        assert srv2.stop(signal.SIGINT) == 0


def test_stop_while_the_model_warms_up_exits_cleanly(tmp_path: Path) -> None:
    # SIGTERM as soon as /health answers: the embedder's warm-up thread is then still building its sessions in
    # native code (about 1.2 s on this machine, idle), and an interpreter teardown under it aborted (SIGABRT,
    # exit -6). tests/unit/test_serve_shutdown.py holds the wait itself to a thread that outlives it.
    # Where the thread is when the signal lands varies: before the fix one stop in three aborted, so three stops.
    for attempt in range(3):
        with ServerProcess(tmp_path / f"data{attempt}") as srv:
            srv.wait_ready()
            assert srv.stop(signal.SIGTERM) == 0, "\n".join(srv.lines[-20:])
            assert any("stopped in" in line for line in srv.lines)


def test_second_server_on_same_data_dir_refuses(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "d") as srv:
        srv.wait_ready()
        other = subprocess.run(
            [sys.executable, "-m", "ctxstore.cli", "serve", "--data-dir", str(tmp_path / "d"), "--port", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.returncode != 0 and "already using" in other.stderr


def test_keys_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = _cli(data, "create", "--org", "acme_org")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("csk_")  # exactly the key
    key = lines[0]
    prefix = key.split("_")[1]
    short = _cli(data, "create", "--org", "acme_org", "--expires-in", "30d").stdout.strip()
    listing = _cli(data, "list").stdout
    assert prefix in listing and short.split("_")[1] in listing and key.split("_")[2] not in listing
    assert "never" in listing and "expires=20" in listing
    with ServerProcess(data) as srv:
        srv.wait_ready()
        with srv.client(key) as c:
            assert c.get("/databases").status_code == 200
        assert _cli(data, "revoke", prefix).returncode == 0
        with srv.client(key) as c:
            assert c.get("/databases").status_code == 401
    assert _cli(data, "revoke", "nosuchprefix").returncode == 1
    assert _cli(data, "create", "--org", "acme_org", "--expires-in", "soon").returncode == 2
