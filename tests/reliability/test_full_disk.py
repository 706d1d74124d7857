"""Issue 12 item 4: a full disk, for real (a small tmpfs holds the data dir), through a real `ctxstore serve`.

While the disk is full an ingest answers 503 SERVICE_UNAVAILABLE with Retry-After (not 500), items in
flight are retried with backoff instead of being dropped or stranded, the worker does not log a
traceback per tick, and once space is freed every accepted item completes.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess
from tests.support.tmpfs import mounted_tmpfs

DB = "full"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "small", "64m") as mnt:
        yield mnt


def _fill(path: Path) -> None:
    """Write until the filesystem says ENOSPC (unbuffered, so nothing is left to flush at close)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)


def _ingest(c: httpx.Client, ids: list[str]) -> httpx.Response:
    items = [
        {"id": i, "title": f"Note {i}", "type": "note", "content": {"text": f"Note {i} about storage. " * 200}}
        for i in ids
    ]
    return c.post("/context/ingest", data={"database": DB, "app_knowledge": json.dumps(items)})


def _statuses(c: httpx.Client, ids: list[str]) -> dict[str, str]:
    r = c.get("/context/status", params={"database": DB, "ids": ",".join(ids)})
    return {s["id"]: s["indexing_status"] for s in r.json()["data"]["statuses"]}


def test_full_disk_refuses_with_503_retries_in_flight_items_and_recovers(small_disk: Path) -> None:
    with ServerProcess(small_disk / "data") as srv:
        srv.wait_ready(60)
        [key] = srv.printed_keys
        with srv.client(key) as c:
            assert c.post("/databases", json={"database": DB}).status_code == 202
            deadline = time.time() + 30
            while not c.get("/databases/status", params={"database": DB}).json()["data"]["infra"][
                "ready_for_ingestion"
            ]:
                assert time.time() < deadline
                time.sleep(0.05)
            in_flight = [f"f{i}" for i in range(12)]
            assert _ingest(c, in_flight).status_code == 202
            filler = small_disk / "filler"
            _fill(filler)  # the disk fills while those items are being processed

            refused = _ingest(c, ["late"])
            assert refused.status_code == 503, refused.text
            body = refused.json()
            assert body["success"] is False and body["error"]["code"] == "SERVICE_UNAVAILABLE"
            assert int(refused.headers["Retry-After"]) >= 1

            time.sleep(4)  # the workers meet the full disk for a while
            seen = _statuses(c, in_flight)
            assert "errored" not in seen.values(), seen  # retried, not failed at the first full write
            tracebacks_while_full = sum(1 for line in srv.lines if line.startswith("Traceback"))

            filler.unlink()
            accepted = _ingest(c, ["late"])
            assert accepted.status_code == 202, accepted.text
            everything = [*in_flight, "late"]
            deadline = time.time() + 120
            while set(_statuses(c, everything).values()) != {"completed"}:
                assert time.time() < deadline, _statuses(c, everything)
                time.sleep(0.25)
            hits = c.post("/query", json={"database": DB, "query": "storage note", "max_results": 20}).json()
            assert {h["id"] for h in hits["data"]["chunks"]} <= set(everything) and hits["data"]["chunks"]
        # A warning line per backoff, not a traceback per 50 ms tick (the issue saw 1,607 in 45 s).
        assert tracebacks_while_full <= 3, "\n".join(srv.lines[-60:])
