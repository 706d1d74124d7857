"""kill -9 in the middle of ingestion: after a restart all 200 accepted items complete, none twice."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from tests.support import data_at_size
from tests.support.server import ServerProcess

N = 200


def _statuses(client, ids: list[str]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    out: dict[str, str] = {}
    for start in range(0, len(ids), 100):
        r = client.get("/context/status", params={"database": "acme", "ids": ",".join(ids[start : start + 100])})
        for s in r.json()["data"]["statuses"]:
            out[s["id"]] = s["indexing_status"]
    return out


def _spawned_children(pid: int) -> list[int]:
    """Processes the server spawned through multiprocessing (the extraction pool)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (proc / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"multiprocessing" in cmd:
            out.append(int(proc.name))
    return out


def test_kill9_during_ingest_then_restart_completes_everything_once(tmp_path: Path) -> None:
    data = data_at_size.data_dir(tmp_path / "data")  # CTXSTORE_TEST_DATA_DIR: at size (diagnostic)
    ids = [f"item{i:03d}" for i in range(N)]
    with ServerProcess(data) as srv:
        srv.wait_ready(data_at_size.ready_timeout())
        key = data_at_size.api_key(srv)
        with srv.client(key) as c:
            c.post("/databases", json={"database": "acme"})
            deadline = time.time() + 20
            while not c.get("/databases/status", params={"database": "acme"}).json()["data"]["infra"][
                "ready_for_ingestion"
            ]:
                assert time.time() < deadline
                time.sleep(0.05)
            for start in range(0, N, 50):
                batch = [
                    {
                        "id": i,
                        "title": f"Item {i}",
                        "type": "note",
                        "content": {"text": f"Item {i} describes unique topic number {i} in detail. " * 5},
                    }
                    for i in ids[start : start + 50]
                ]
                r = c.post("/context/ingest", data={"database": "acme", "app_knowledge": json.dumps(batch)})
                assert r.status_code == 202 and r.json()["data"]["success_count"] == 50
            # Let some work start, then kill the server mid-flight.
            deadline = time.time() + 60
            while time.time() < deadline:
                st = _statuses(c, ids)
                if any(v == "completed" for v in st.values()):
                    break
                time.sleep(0.1)
            before = _statuses(c, ids)
            children = _spawned_children(srv.proc.pid)
            assert children, "the extraction pool should be running by now"
        srv.kill9()
    # The extraction pool's processes follow their server instead of living on as orphans.
    deadline = time.time() + 10
    while any(Path(f"/proc/{child}").exists() for child in children) and time.time() < deadline:
        time.sleep(0.1)
    assert not [child for child in children if Path(f"/proc/{child}").exists()]
    assert sum(v == "completed" for v in before.values()) < N, "the kill came too late to test anything"

    with sqlite3.connect(data / "records.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    with ServerProcess(data) as srv:
        srv.wait_ready(data_at_size.ready_timeout())
        with srv.client(key) as c:
            deadline = time.time() + 240
            while time.time() < deadline:
                st = _statuses(c, ids)
                if all(v == "completed" for v in st.values()):
                    break
                time.sleep(0.5)
            assert all(v == "completed" for v in st.values()), {k: v for k, v in st.items() if v != "completed"}
            # none twice: each item has exactly its own chunks, indexed once
            for i in ids[::20]:
                chunks = c.get("/context/chunks", params={"database": "acme", "id": i}).json()["data"]
                texts = [ch["text"] for ch in chunks["chunks"]]
                assert chunks["total"] == len(set(ch["chunk_id"] for ch in chunks["chunks"])) >= 1
                assert len(texts) == len(set(texts))
            stats = c.get("/databases/stats", params={"database": "acme"}).json()["data"]
            total_chunks = sum(
                c.get("/context/chunks", params={"database": "acme", "id": i}).json()["data"]["total"] for i in ids
            )
            assert stats["knowledge_collection"]["row_count"] == total_chunks
        assert srv.stop() == 0
    with sqlite3.connect(data / "records.db") as conn:
        dead = conn.execute("SELECT COUNT(*) FROM jobs WHERE state='dead'").fetchone()[0]
        assert dead == 0
