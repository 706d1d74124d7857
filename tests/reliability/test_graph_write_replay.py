"""A write cut off by an engine crash is not sent again behind the caller's back.

The engine may have applied it before dying (its reply is what got lost), and replaying a CREATE would
duplicate what it made. Reads and writes that never reached the engine are still retried once after the
restart; a cut-off write comes back as a retryable StoreUnavailable for the caller to decide.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import redis

from ctxstore.adapters.local.falkordb_engine import FalkorEngine
from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore, _never_sent
from ctxstore.domain.errors import StoreUnavailable


def test_only_commands_that_never_left_count_as_safe_to_send_again() -> None:
    assert _never_sent(redis.ConnectionError("Error 111 connecting to /tmp/x.sock. Connection refused."))
    assert _never_sent(redis.ConnectionError("Error 32 while writing to socket. Broken pipe."))
    assert _never_sent(redis.BusyLoadingError("Redis is loading the dataset in memory"))
    assert not _never_sent(redis.ConnectionError("Connection closed by server."))
    assert not _never_sent(redis.ConnectionError("Error while reading from socket: (104, 'Connection reset')"))


def test_write_cut_off_by_a_crash_is_reported_not_replayed_and_reads_recover(tmp_path: Path) -> None:
    engine = FalkorEngine(tmp_path / "graph")
    store = FalkorGraphStore(engine)
    try:
        store.query("org", "g", "CREATE (:Seed {i: 1})")
        pid = engine.pid
        assert pid is not None
        killer = threading.Timer(0.4, os.kill, (pid, signal.SIGKILL))
        killer.start()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="may or may not have been applied"):
            # long enough to be running when the engine dies
            store.query("org", "g", "UNWIND range(1, 20000000) AS i CREATE (:Bulk {i: i})")
        killer.join()
        assert time.monotonic() - started < 60
        assert engine.pid not in (None, pid)
        # the engine is back: the seed (acknowledged) is there, the cut-off write was not replayed to completion
        res = store.query("org", "g", "MATCH (n) RETURN count(n) AS c", read_only=True)
        assert res.rows[0][0] < 20000001
        seed = store.query("org", "g", "MATCH (n:Seed) RETURN count(n)", read_only=True)
        assert seed.rows == [[1]]
    finally:
        store.close()
        engine.stop()
