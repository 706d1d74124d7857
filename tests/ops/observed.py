"""A real local app with `serve`'s observability installed (metrics sink, readiness), and its /metrics parsed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from ctxstore.config import Settings
from ctxstore.http.app import create_app
from ctxstore.observability.readiness import Step
from ctxstore.pipeline.jobs import queue_specs
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.runtime import build_container
from ctxstore.runtime.observability import Running, start_observability
from ctxstore.services.registry import build_services
from tests.support.app import LocalApp

LOOPBACK = ("127.0.0.1", 50000)


@dataclass
class ObservedApp(LocalApp):
    running: Running = field(default=None)  # type: ignore[assignment]

    def scrape(self, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of GET /metrics: {(name, sorted labels): value}."""
        r = self.client.get("/metrics", headers=headers)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/plain")
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text)
            for s in family.samples
        }

    def ingest_text(self, item_id: str, text: str, database: str = "acme") -> None:
        doc = {"id": item_id, "title": item_id, "type": "note", "content": {"text": text}}
        r = self.client.post(
            "/context/ingest",
            headers=self.headers(),
            data={"database": database, "app_knowledge": json.dumps([doc])},
        )
        assert r.status_code == 202, r.text

    def close(self) -> None:
        self.running.close()
        super().close()


def sample(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The value of one sample (0 when absent: a counter that never moved is not exposed per label)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def observed_app(
    data_dir: Path, *, steps: list[Step] | None = None, client: tuple[str, int] = LOOPBACK, **settings: Any
) -> ObservedApp:
    s = Settings(data_dir=data_dir, **settings)
    container = build_container(s)
    services = build_services(container)
    key = services.keys.bootstrap_default()
    assert key is not None
    running = start_observability(
        s, container, steps=steps if steps is not None else [], state_cache_s=0, items_cache_s=0
    )
    app = create_app(services, observability=running.observability)
    tc = TestClient(app, raise_server_exceptions=False, client=client)
    runner = LocalRunner(container.queue, queue_specs(services))
    return ObservedApp(container, services, app, tc, key, runner, data_dir, running)


@dataclass
class Receiver:
    """An HTTP endpoint on loopback answering `status` to every POST (a webhook target, an OTLP collector)."""

    server: ThreadingHTTPServer
    status: int = 200
    bodies: list[bytes] = field(default_factory=list)
    posts: list[tuple[str, str]] = field(default_factory=list)  # (path, content-type) of each POST

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return self.base_url + "/hook"


def receiver() -> Iterator[Receiver]:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            rec = holder["r"]
            rec.bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            rec.posts.append((self.path, self.headers.get("content-type", "")))
            self.send_response(rec.status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["r"] = rec = Receiver(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield rec
    server.shutdown()
    server.server_close()
