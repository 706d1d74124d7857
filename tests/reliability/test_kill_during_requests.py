"""kill -9 while requests are in flight leaves a consistent data dir, and accepted work completes."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import httpx

from tests.support.server import ServerProcess


def test_kill9_mid_requests_leaves_consistent_data(tmp_path: Path) -> None:
    data = tmp_path / "data"
    accepted: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    with ServerProcess(data) as srv:
        srv.wait_ready()
        [key] = srv.printed_keys

        def writer(worker: int) -> None:
            with srv.client(key) as c:
                i = 0
                while not stop.is_set():
                    name = f"db_{worker}_{i}"
                    i += 1
                    try:
                        r = c.post("/databases", json={"database": name})
                    except httpx.HTTPError:
                        return
                    if r.status_code == 202:
                        with lock:
                            accepted.append(name)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        srv.kill9()
        stop.set()
        for t in threads:
            t.join(10)
    assert len(accepted) > 10

    with sqlite3.connect(data / "records.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    with ServerProcess(data) as srv:
        srv.wait_ready()
        with srv.client(key) as c:
            deadline = time.time() + 30
            while True:
                listing = c.get("/databases").json()["data"]["databases"]
                statuses = {n: c.get("/databases/status", params={"database": n}).json()["data"] for n in accepted}
                if all(s["infra"]["ready_for_ingestion"] for s in statuses.values()) or time.time() > deadline:
                    break
                time.sleep(0.2)
            # Every database acknowledged with 202 exists and finished provisioning after the restart.
            assert set(accepted) <= set(listing)
            assert all(s["infra"]["ready_for_ingestion"] for s in statuses.values())
            # Anything created but not acknowledged is complete too, never half-made.
            for name in set(listing) - set(accepted):
                assert c.get("/databases/status", params={"database": name}).json()["data"]["infra"][
                    "ready_for_ingestion"
                ]
        assert srv.stop() == 0
