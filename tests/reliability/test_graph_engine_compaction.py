"""The graph engine keeps its AOF increment small (so a restart replays little) and repairs what an RDB load breaks.

FalkorDB 4.16 leaves node id 0 out of the range indexes of a graph it loads from RDB (a rewritten AOF's base,
a restored backup): an index lookup then misses that node, and a MERGE on it would
duplicate it. (Seen with numbers; strings were found.)
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ctxstore.adapters.local.falkordb_engine import FalkorEngine


def _q(engine: FalkorEngine, cypher: str) -> list[list[object]]:
    conn = redis.Redis(unix_socket_path=engine.socket_path, decode_responses=True)
    try:
        reply = conn.execute_command("GRAPH.QUERY", "g", cypher)  # type: ignore[no-untyped-call]
    finally:
        conn.close()
    return list(reply[1]) if len(reply) == 3 else []


def _aof_files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (folder / "appendonlydir").iterdir()}


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "graph"


def test_index_lookups_find_node_zero_after_a_load_from_rdb(folder: Path) -> None:
    engine = FalkorEngine(folder, aof_rewrite_bytes=0)
    engine.start()
    try:
        _q(engine, "CREATE INDEX FOR (s:Source) ON (s.sid, s.n)")
        _q(engine, "UNWIND range(0, 9999) AS i CREATE (:Source {sid: 'item-' + toString(i), n: i, title: 'a' + i})")
        assert _q(engine, "MATCH (s:Source {n: 0}) RETURN id(s)") == [[0]]
    finally:
        engine.stop()  # rewrites the AOF: the next start loads an RDB base
    assert any(name.endswith(".base.rdb") and size > 1000 for name, size in _aof_files(folder).items())

    engine = FalkorEngine(folder, aof_rewrite_bytes=0)
    engine.start()
    try:
        assert _q(engine, "MATCH (s:Source {n: 0}) RETURN id(s)") == [[0]]
        assert _q(engine, "MATCH (s:Source {sid: 'item-0'}) RETURN id(s)") == [[0]]
        assert _q(engine, "MATCH (s:Source) WHERE s.n >= 0 RETURN count(s)") == [[10000]]
        # a MERGE finds the node rather than making a second one
        _q(engine, "MERGE (:Source {n: 0})")
        assert _q(engine, "MATCH (s:Source) RETURN count(s)") == [[10000]]
    finally:
        engine.stop()


def test_the_aof_is_rewritten_past_its_threshold_and_a_kill_9_after_it_loses_nothing(folder: Path) -> None:
    engine = FalkorEngine(folder, aof_rewrite_bytes=64 * 1024)
    engine.compactor.interval_s = 0.1
    engine.start()
    try:
        _q(engine, "CREATE INDEX FOR (n:V) ON (n.i)")
        for start in range(0, 20_000, 2_000):
            _q(engine, f"UNWIND range({start}, {start + 1999}) AS i CREATE (:V {{i: i, name: 'node-' + toString(i)}})")

        def increment() -> int:
            return sum(size for name, size in _aof_files(folder).items() if name.endswith(".incr.aof"))

        deadline = time.monotonic() + 30
        while (engine.compactor.rewrites == 0 or increment() >= 64 * 1024) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.compactor.rewrites >= 1
        assert increment() < 64 * 1024  # 1.3 MB of writes, yet the increment restarted from empty
        # acknowledged writes after the rewrite, then a kill -9: the supervisor restarts from base + increment
        _q(engine, "MATCH (a:V {i: 0}) CREATE (a)-[:E]->(:V {i: -1})")
        _q(engine, "MATCH (n:V {i: 5}) SET n.name = 'renamed'")
        pid = engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while engine.pid in (None, pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine.wait_ready(60)
        assert _q(engine, "MATCH (n:V) RETURN count(n)") == [[20_001]]
        assert _q(engine, "MATCH (:V {i: 0})-[:E]->(m:V) RETURN m.i") == [[-1]]
        assert _q(engine, "MATCH (n:V {i: 5}) RETURN n.name") == [["renamed"]]
    finally:
        engine.stop()
