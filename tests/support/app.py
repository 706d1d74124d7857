"""Build a real ctxstore app on the local backend in a temporary folder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from ctxstore.config import Settings
from ctxstore.http.app import ALL_ROUTERS, create_app
from ctxstore.pipeline.jobs import queue_specs
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.runtime import build_container
from ctxstore.services.container import Container
from ctxstore.services.registry import Services, build_services


@dataclass
class LocalApp:
    container: Container
    services: Services
    app: FastAPI
    client: TestClient
    key: str
    runner: LocalRunner
    data_dir: Path

    def headers(self, key: str | None = None, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}", "API-Version": "2", **extra}

    def drain(self) -> int:
        """Run queued background work (provisioning, ingestion) to completion."""
        return self.runner.drain()

    def create_ready_database(self, name: str, key: str | None = None, **body: Any) -> None:
        r = self.client.post("/databases", json={"database": name, **body}, headers=self.headers(key))
        assert r.status_code == 202, r.text
        self.drain()

    def close(self) -> None:
        self.client.close()
        self.container.close()


def make_app(data_dir: Path, *, extra_routers: Sequence[APIRouter] = (), **settings: Any) -> LocalApp:
    container = build_container(Settings(data_dir=data_dir, **settings))
    services = build_services(container)
    key = services.keys.bootstrap_default()
    assert key is not None
    app = create_app(services, [*ALL_ROUTERS, *extra_routers])
    client = TestClient(app, raise_server_exceptions=False)
    runner = LocalRunner(container.queue, queue_specs(services))
    return LocalApp(container, services, app, client, key, runner, data_dir)
