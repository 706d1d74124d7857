"""One real `ctxstore serve` for the agent-access tests (client, CLI, MCP over HTTP), started once per package.

Each test works in databases of its own, so sharing the server keeps the suite fast without coupling tests.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxstore.client import CtxstoreClient
from tests.support.server import ServerProcess


@dataclass
class Served:
    server: ServerProcess
    key: str

    @property
    def url(self) -> str:
        return self.server.base_url

    def client(self, database: str | None = None, key: str | None = None) -> CtxstoreClient:
        return CtxstoreClient(self.url, key or self.key, database=database)

    def new_key(self, org: str) -> str:
        """A key of another organisation (`ctxstore keys create` on the live data dir)."""
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "ctxstore.cli",
                "keys",
                "create",
                "--org",
                org,
                "--data-dir",
                str(self.server.data_dir),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return out.stdout.strip()

    def ready_database(self, prefix: str = "db") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        with self.client() as c:
            c.databases.create(name)
            assert c.databases.wait_ready(name, timeout=30).ready
        return name


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data: Path = tmp_path_factory.mktemp("agent-serve")
    with ServerProcess(data, "--allow-private-webhooks") as srv:
        srv.wait_ready(60)
        [key] = srv.printed_keys
        yield Served(srv, key)
