"""/health (alive) and /ready (the first query would answer now) differ while an engine is still loading.

The warm-up steps here are hooks standing in for a slow graph load (an event the test releases); the real steps
(graph engine start, vector scopes read) run in tests/ops/test_serve_observed.py against `ctxstore serve`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.ops.observed import observed_app


def _wait(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_ready_is_503_while_the_graph_loads_and_200_once_it_has(tmp_path: Path) -> None:
    graph_loaded = threading.Event()
    vectors_read: list[bool] = []
    steps = [("graph", lambda: graph_loaded.wait(30)), ("vectors", lambda: vectors_read.append(True))]
    oa = observed_app(tmp_path / "data", steps=steps)
    try:
        assert oa.client.get("/health").status_code == 200  # alive at once
        r = oa.client.get("/ready")
        assert r.status_code == 503 and r.headers["Retry-After"] == "1"
        body = r.json()
        assert body["status"] == "loading"
        assert body["parts"]["graph"] == {"state": "loading"}
        # the steps run at once: the vectors do not wait for the graph (a restart waits for the slowest only)
        _wait(lambda: vectors_read == [True])
        assert oa.client.get("/ready").json()["parts"]["vectors"]["state"] == "ready"
        assert oa.client.get("/ready").status_code == 503
        graph_loaded.set()
        _wait(lambda: oa.client.get("/ready").status_code == 200)
        parts = oa.client.get("/ready").json()["parts"]
        assert parts["graph"]["state"] == parts["vectors"]["state"] == "ready"
        assert parts["graph"]["seconds"] >= 0 and vectors_read == [True]
    finally:
        graph_loaded.set()
        oa.close()


def test_a_failed_warm_up_keeps_ready_503_and_says_why(tmp_path: Path) -> None:
    def broken() -> None:
        raise RuntimeError("graph engine exited with 1 during start-up")

    oa = observed_app(tmp_path / "data", steps=[("graph", broken)])
    try:
        _wait(lambda: oa.client.get("/ready").json()["parts"]["graph"]["state"] != "loading")
        r = oa.client.get("/ready")
        assert r.status_code == 503
        assert r.json()["parts"]["graph"]["error"] == "RuntimeError: graph engine exited with 1 during start-up"
        assert oa.client.get("/health").status_code == 200
    finally:
        oa.close()


def test_ready_needs_no_key_and_is_ready_with_nothing_to_load(tmp_path: Path) -> None:
    oa = observed_app(tmp_path / "data", steps=[])
    try:
        r = oa.client.get("/ready")
        assert r.status_code == 200 and r.json() == {"status": "ready", "api_version": "2.0.0", "parts": {}}
    finally:
        oa.close()
