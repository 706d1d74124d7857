"""Issue 27 part 2: `ctxstore backup` while `serve` ingests, `ctxstore restore` into a new data dir.

Every item acknowledged before the backup began is in the restored server with its status, chunks and relations;
items written after the backup finished are not; a backup killed with SIGKILL midway leaves no backup under its
name and the source serving (its files intact).
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

TEXT = "Microsoft acquired GitHub in 2018. Ada Lovelace joined Acme Corp in March 2024. Topic {i}: {words}."


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def _ready_database(c: httpx.Client) -> None:
    assert c.post("/databases", json={"database": "acme"}).status_code == 202
    deadline = time.time() + 30
    while not c.get("/databases/status", params={"database": "acme"}).json()["data"]["infra"]["ready_for_ingestion"]:
        assert time.time() < deadline
        time.sleep(0.05)


def _ingest(c: httpx.Client, ids: list[str], collection: str = "live") -> None:
    batch = [
        {
            "id": i,
            "title": f"Item {i}",
            "type": "note",
            "content": {"text": TEXT.format(i=i, words=" ".join(f"w{i}x{n}" for n in range(20)))},
        }
        for i in ids
    ]
    form = {"database": "acme", "collection": collection, "app_knowledge": json.dumps(batch)}
    r = c.post("/context/ingest", data=form)
    assert r.status_code == 202 and r.json()["data"]["success_count"] == len(ids), r.text


def _statuses(c: httpx.Client, ids: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for start in range(0, len(ids), 100):
        batch = ids[start : start + 100]
        collection = "docs" if batch[0].startswith("pre") else "live"
        params = {"database": "acme", "collection": collection, "ids": ",".join(batch)}
        r = c.get("/context/status", params=params)
        for s in r.json()["data"]["statuses"]:
            out[s["id"]] = s["indexing_status"]
    return out


def _wait_completed(c: httpx.Client, ids: list[str], timeout: float = 240) -> dict[str, str]:
    deadline = time.time() + timeout
    while True:
        st = _statuses(c, ids)
        if all(st.get(i) == "completed" for i in ids) or time.time() > deadline:
            return st
        time.sleep(0.3)


def _top10(c: httpx.Client) -> list[str]:
    body = {"database": "acme", "collection": "docs", "query": "Who acquired GitHub? wpre007x3", "max_results": 10}
    r = c.post("/query", json=body)
    assert r.status_code == 200, r.text
    found = [chunk["id"] for chunk in r.json()["data"]["chunks"]]
    assert found[0] == "pre007"
    return found


class Writer(threading.Thread):
    """Steady ingest and query load on the source: batches of 5 items, a query between batches."""

    def __init__(self, c: httpx.Client, prefix: str) -> None:
        super().__init__(daemon=True)
        self.c, self.prefix = c, prefix
        self.acked: list[str] = []
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            ids = [f"{self.prefix}{n + k:04d}" for k in range(5)]
            try:
                _ingest(self.c, ids)
                self.acked.extend(ids)
                self.c.post("/query", json={"database": "acme", "query": "Who acquired GitHub?"})
            except Exception as exc:  # reported by the test, not swallowed
                self.errors.append(repr(exc))
            n += 5


def test_backup_under_load_restores_every_item_acknowledged_before_it(tmp_path: Path) -> None:
    source, backup, restored = tmp_path / "src", tmp_path / "backup", tmp_path / "restored"
    with ServerProcess(source) as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        with srv.client(key) as c, srv.client(key) as load:
            _ready_database(c)
            first = [f"pre{i:03d}" for i in range(30)]
            _ingest(c, first, collection="docs")
            assert set(_wait_completed(c, first).values()) == {"completed"}
            writer = Writer(load, "live")
            writer.start()
            time.sleep(1.0)
            before = first + list(writer.acked)  # acknowledged before the backup began
            status_at_backup = {**_statuses(c, first), **_statuses(c, before[len(first) :])}
            top10 = _top10(c)  # the "docs" collection is complete and the load writes elsewhere: its answer stands
            done = _cli("backup", "--data-dir", str(source), "--to", str(backup))
            assert done.returncode == 0, done.stderr
            assert "while the server ran" in done.stdout
            after_backup = len(writer.acked)
            time.sleep(1.0)  # keep writing after the backup
            writer.stop.set()
            writer.join(60)
            assert not writer.errors, writer.errors
            later = writer.acked[after_backup:]
            assert later, "the load kept writing after the backup"
        assert srv.stop() == 0

    manifest = json.loads((backup / "manifest.json").read_text())
    assert {"records.db", "search.db", "connector_credentials.key", "url_signing.key"} <= set(manifest["files"])
    assert "graph/dump.rdb" in manifest["files"]
    done = _cli("restore", str(backup), "--data-dir", str(restored))
    assert done.returncode == 0, done.stderr

    with ServerProcess(restored) as srv:
        srv.wait_ready()
        assert srv.printed_keys == []  # the keys came with the backup
        with srv.client(key) as c:
            now = {**_statuses(c, first), **_statuses(c, before[len(first) :])}
            assert set(now) == set(before), f"missing after restore: {set(before) - set(now)}"
            # Completed at the backup point: still completed. Still queued or running then: finished now.
            assert all(now[i] == "completed" for i in before if status_at_backup.get(i) == "completed")
            final = {**_wait_completed(c, first), **_wait_completed(c, before[len(first) :])}
            assert all(final[i] == "completed" for i in before), {i: s for i, s in final.items() if s != "completed"}
            for i in later[:10]:  # written after the backup finished, so not in it
                gone = c.get("/context/status", params={"database": "acme", "collection": "live", "ids": i})
                assert gone.json()["data"] is None or not gone.json()["data"]["statuses"], gone.text
            for i in before[:: max(1, len(before) // 8)]:
                where = {"database": "acme", "collection": "docs" if i.startswith("pre") else "live", "id": i}
                chunks = c.get("/context/chunks", params=where).json()["data"]
                assert chunks["total"] >= 1
                relations = c.get("/context/relations", params=where).json()["data"]
                assert relations["relations"], f"{i} lost its relations"
            assert _top10(c) == top10
        assert srv.stop() == 0


def test_kill9_of_a_backup_midway_leaves_the_source_untouched_and_serving(tmp_path: Path) -> None:
    source, backup = tmp_path / "src", tmp_path / "backup"
    with ServerProcess(source) as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        with srv.client(key) as c:
            _ready_database(c)
            ids = [f"item{i:03d}" for i in range(40)]
            _ingest(c, ids)
            _wait_completed(c, ids)
            proc = subprocess.Popen(
                [sys.executable, "-m", "ctxstore.cli", "backup", "--data-dir", str(source), "--to", str(backup)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            partial = tmp_path / f".backup.partial-{proc.pid}"
            deadline = time.time() + 60
            while not (partial / "records.db").exists() and proc.poll() is None and time.time() < deadline:
                time.sleep(0.001)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            assert proc.returncode == -signal.SIGKILL, "the backup finished before it could be killed"
            assert not backup.exists()  # no half backup under the name asked for

            # The source serves on: reads, new writes, their indexing.
            assert set(_statuses(c, ids).values()) == {"completed"}
            _ingest(c, ["after-kill"])
            assert _wait_completed(c, ["after-kill"]) == {"after-kill": "completed"}
            with sqlite3.connect(source / "records.db") as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            # The next backup succeeds beside the killed one's leftovers.
            done = _cli("backup", "--data-dir", str(source), "--to", str(backup))
            assert done.returncode == 0, done.stderr
        assert srv.stop() == 0


def test_backup_refuses_an_existing_target_and_restore_a_damaged_backup(tmp_path: Path) -> None:
    source = tmp_path / "src"
    assert _cli("keys", "--data-dir", str(source), "create", "--org", "acme_org").returncode == 0
    (tmp_path / "taken").mkdir()
    refused = _cli("backup", "--data-dir", str(source), "--to", str(tmp_path / "taken"))
    assert refused.returncode == 1 and "already exists" in refused.stderr

    offline = _cli("backup", "--data-dir", str(source), "--to", str(tmp_path / "b"))
    assert offline.returncode == 0 and "offline" in offline.stdout
    with (tmp_path / "b" / "records.db").open("r+b") as fh:
        fh.seek(200)
        fh.write(b"\xff\xff")
    damaged = _cli("restore", str(tmp_path / "b"), "--data-dir", str(tmp_path / "new"))
    assert damaged.returncode == 1 and "records.db is missing or damaged" in damaged.stderr
    assert not (tmp_path / "new").exists()


def test_offline_backup_of_a_stopped_data_dir_restores_its_graph(tmp_path: Path) -> None:
    """No server: the graph engine's append-only files are copied at rest (under the serve lock) and restored."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "datadir-2.0.0"
    expected = json.loads((fixture.parent / "datadir-2.0.0.expected.json").read_text())
    source = tmp_path / "src"
    shutil.copytree(fixture, source)
    done = _cli("backup", "--data-dir", str(source), "--to", str(tmp_path / "b"))
    assert done.returncode == 0 and "offline" in done.stdout, done.stderr
    assert (
        "graph/appendonlydir/appendonly.aof.manifest"
        in json.loads((tmp_path / "b" / "manifest.json").read_text())["files"]
    )
    assert _cli("restore", str(tmp_path / "b"), "--data-dir", str(tmp_path / "new")).returncode == 0
    with ServerProcess(tmp_path / "new") as srv:
        srv.wait_ready()
        with srv.client(expected["api_key"]) as c:
            relations = c.get("/context/relations", params={"database": "acme", "id": "acq"}).json()["data"]
            assert relations["relations"]
        assert srv.stop() == 0


def test_an_offline_backup_holds_the_serve_lock_so_no_server_starts_mid_copy(tmp_path: Path) -> None:
    from ctxstore.adapters.local.data_dir_backup import _serve_lock

    data = tmp_path / "data"
    data.mkdir()
    with _serve_lock(data) as offline:
        assert offline
        serve = _cli("serve", "--data-dir", str(data), "--port", "1", timeout=120)
        assert serve.returncode == 1 and "already using" in serve.stderr


def test_sigusr1_backs_up_a_running_server_with_backup_dir(tmp_path: Path) -> None:
    """The online equivalent for operators who script the process: `serve --backup-dir D`, then `kill -USR1`."""
    backups = tmp_path / "backups"
    with ServerProcess(tmp_path / "src", "--backup-dir", str(backups)) as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        with srv.client(key) as c:
            _ready_database(c)
            _ingest(c, ["one", "two"])
            _wait_completed(c, ["one", "two"])
            srv.proc.send_signal(signal.SIGUSR1)
            deadline = time.time() + 60
            while not any("backup written to" in line for line in srv.lines):
                assert time.time() < deadline, srv.lines
                time.sleep(0.1)
            assert c.get("/health").status_code == 200  # still serving
        assert srv.stop() == 0
    [backup] = [p for p in backups.iterdir() if not p.name.startswith(".")]
    assert _cli("restore", str(backup), "--data-dir", str(tmp_path / "new")).returncode == 0
    with ServerProcess(tmp_path / "new") as srv:
        srv.wait_ready()
        with srv.client(key) as c:
            assert _statuses(c, ["one", "two"]) == {"one": "completed", "two": "completed"}
        assert srv.stop() == 0
