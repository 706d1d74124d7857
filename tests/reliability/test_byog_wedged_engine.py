"""A query the engine cannot stop (its parser ignores the timeout) does not wedge the engine for everyone.

When no answer comes within the budget plus the client's grace, the graph store kills the engine
and the supervisor restarts it: the stuck thread is gone, acknowledged writes are still there
(appendfsync always) and the next query is answered at once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ctxstore.adapters.local.falkordb_engine import FalkorEngine
from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.graph import GraphTimeout


def test_stuck_query_times_out_and_the_engine_is_restarted(tmp_path: Path) -> None:
    engine = FalkorEngine(tmp_path / "graph", timeout_default_ms=500, timeout_max_ms=500)
    store = FalkorGraphStore(engine, grace_s=1.0)
    try:
        store.query("org", "kept", "UNWIND range(1, 100) AS i CREATE (:N {i: i})")
        pid = engine.pid
        # 24 nested lists: minutes of parsing (the service's screen refuses this; here it goes straight in)
        stuck = "RETURN " + "[" * 24 + "]" * 24 + " AS x"
        started = time.monotonic()
        with pytest.raises(GraphTimeout) as stopped:
            store.query("org", "other", stuck, read_only=True, timeout_ms=500)
        # To callers other than BYOG (which answers a query over budget with its advice) a store briefly
        # unavailable: 503 with Retry-After, not the 500 a request in flight got when the engine wedged.
        assert isinstance(stopped.value, StoreUnavailable)
        assert time.monotonic() - started < 20
        assert engine.pid not in (None, pid) and engine.restarts == 1
        res = store.query("org", "kept", "MATCH (n:N) RETURN count(n) AS c, sum(n.i) AS s", read_only=True)
        assert res.rows == [[100, 5050.0]]
    finally:
        store.close()
        engine.stop()
