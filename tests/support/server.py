"""Run a real `ctxstore serve` in a subprocess, on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(
        self,
        data_dir: Path,
        *extra_args: str,
        env: dict[str, str] | None = None,
        program: list[str] | None = None,  # default: this interpreter's ctxstore; e.g. an installed wheel's script
    ) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        cmd = [
            *(program or [sys.executable, "-m", "ctxstore.cli"]),
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            str(self.port),
            *extra_args,
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})}
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self, timeout: float = 90) -> None:  # startup loads the models: slow on a busy machine
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + "\n".join(self.lines))
            try:
                if httpx.get(self.base_url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError("server did not become ready:\n" + "\n".join(self.lines))

    @property
    def printed_keys(self) -> list[str]:
        return [line.strip() for line in self.lines if line.strip().startswith("csk_")]

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, timeout=30, headers={"Authorization": f"Bearer {key}", "API-Version": "2"}
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.kill9()
