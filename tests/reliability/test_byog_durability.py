"""A BYOG graph of 50,000+ edges survives a clean restart and a kill -9 of the engine, nothing lost.

FINDINGS: with the module's default EFFECTS_THRESHOLD, replaying such an AOF on start-up
timed out and lost every edge; the engine is loaded with EFFECTS_THRESHOLD 0.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ctxstore.adapters.local.falkordb_engine import FalkorEngine
from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore
from ctxstore.config import Settings
from ctxstore.http.app import create_app
from ctxstore.runtime import build_container
from ctxstore.services.registry import build_services
from tests.support.app import LocalApp, make_app


def _reopen(data: Path, key: str) -> LocalApp:
    """The same data dir in a new service (make_app expects a fresh one)."""
    container = build_container(Settings(data_dir=data))
    services = build_services(container)
    app = create_app(services)
    client = TestClient(app, raise_server_exceptions=False)
    return LocalApp(container, services, app, client, key, None, data)  # type: ignore[arg-type]


EDGES = 50_000
BATCH = 10_000


def _q(la: LocalApp, query: str, params: dict[str, Any] | None = None) -> Any:
    r = la.client.post(
        "/byog/query",
        json={"database": "durable", "collection": "big", "query": query, "params": params or {}},
        headers=la.headers(),
    )
    assert r.status_code == 200, r.text
    return r.json()["data"]


def _counts(la: LocalApp) -> tuple[int, int, int]:
    [row] = _q(la, "MATCH (n:V) RETURN count(n) AS n, sum(n.i) AS s")
    [edges] = _q(la, "MATCH (:V)-[r:E]->(:V) RETURN count(r) AS e")
    return row["n"], edges["e"], row["s"]


def _engine(la: LocalApp) -> FalkorEngine:
    graph = la.container.graph
    assert isinstance(graph, FalkorGraphStore)
    return graph._engine


def test_large_graph_survives_clean_restart_and_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    la = make_app(data)
    key = la.key
    try:
        r = la.client.post("/byog/databases", json={"database": "durable"}, headers=la.headers())
        assert r.status_code == 200
        _q(la, "CREATE INDEX FOR (n:V) ON (n.i)")
        # a chain of EDGES + 1 nodes; each batch creates its nodes and the edges into them
        _q(la, "CREATE (:V {i: 0})")
        for start in range(1, EDGES + 1, BATCH):
            _q(
                la,
                "UNWIND range($a, $b) AS i CREATE (:V {i: i, name: 'node-' + toString(i)})",
                {"a": start, "b": start + BATCH - 1},
            )
            _q(
                la,
                "UNWIND range($a, $b) AS i MATCH (p:V {i: i - 1}), (c:V {i: i}) CREATE (p)-[:E {w: i}]->(c)",
                {"a": start, "b": start + BATCH - 1},
            )
        expected = (EDGES + 1, EDGES, EDGES * (EDGES + 1) // 2)
        assert _counts(la) == expected
    finally:
        la.close()

    # 1. clean restart: a new service on the same data dir
    la = _reopen(data, key)
    try:
        started = time.monotonic()
        assert _counts(la) == expected
        restart_s = time.monotonic() - started
        print(f"\nclean restart with {EDGES} edges: first answer after {restart_s:.3f} s")

        # 2. acknowledged writes, then kill -9 of the engine process right after
        _q(la, "MATCH (a:V {i: 0}) CREATE (a)-[:E {w: -1}]->(:V {i: -1})")
        _q(la, "MATCH (n:V {i: 5}) SET n.name = 'renamed'")
        engine = _engine(la)
        pid = engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        deadline = started + 60
        while time.monotonic() < deadline and (engine.pid in (None, pid)):
            time.sleep(0.01)
        assert engine.pid not in (None, pid), "the supervisor did not restart the engine"
        assert _counts(la) == (EDGES + 2, EDGES + 1, expected[2] - 1)
        print(f"kill -9: engine back and answering after {time.monotonic() - started:.3f} s")
        assert _q(la, "MATCH (n:V {i: 5}) RETURN n.name AS name") == [{"name": "renamed"}]
        assert engine.restarts == 1
    finally:
        la.close()
    # no engine left behind
    assert not (data / "graph" / "falkordb.sock").exists() or _socket_dead(data / "graph" / "falkordb.sock")


def _socket_dead(path: Path) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return True
    return False
