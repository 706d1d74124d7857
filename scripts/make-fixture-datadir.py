"""Write a small data dir with the current release, for the upgrade tests of the next ones (issue 27 part 3).

    uv run python scripts/make-fixture-datadir.py            # -> tests/fixtures/datadir-<version>/

It runs `ctxstore serve` on a fresh data dir, ingests a few knowledge items (text with named entities, so the
graph has relations), waits until all are completed, records a query's answer, stops the server with
SIGTERM (a clean stop: the graph engine writes its final snapshot) and copies the data dir without its run-time
files (lock, logs, sockets). datadir-<version>.expected.json beside it holds the API key, the items, the query
and its top ids: tests/ops/test_data_dir_upgrade.py opens the fixture with the code under test and checks them.
Commit the folder once per release whose data dir format changed; never regenerate an old release's folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_FILES = {"serve.lock", "redis.log", "redis.pid", "engine.stderr", "engine.socket", "falkordb.sock", "dump.rdb"}
QUERY = "Who acquired GitHub?"
ITEMS = [
    ("acq", "Microsoft acquired GitHub in 2018 for 7.5 billion dollars."),
    ("ada", "Ada Lovelace joined Acme Corp in March 2024 as chief scientist."),
    ("paris", "Globex opened its new office in Paris next to the Louvre."),
    ("hol", "Employees get 25 days of paid holiday a year plus public holidays."),
    ("inv", "Invoices are paid within 30 days of receipt by the finance team."),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(data_dir: Path, port: int) -> tuple[subprocess.Popen[bytes], str]:
    """The server, its output in a file (a pipe nobody reads would fill and stall it) and its first key."""
    cmd = [sys.executable, "-m", "ctxstore.cli", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    log = data_dir.parent / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        keys = [line.strip() for line in log.read_text().splitlines() if line.strip().startswith("csk_")]
        if keys:
            return proc, keys[0]
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"serve printed no first key:\n{log.read_text()}")


def _up(c: httpx.Client) -> bool:
    try:
        return c.get("/health").status_code == 200
    except httpx.HTTPError:
        return False


def _wait(check: Callable[[], bool], what: str, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while not check():
        if time.time() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def _populate(c: httpx.Client) -> dict[str, object]:
    c.post("/databases", json={"database": "acme"}).raise_for_status()

    def ready() -> bool:
        status = c.get("/databases/status", params={"database": "acme"}).json()["data"]
        return bool(status["infra"]["ready_for_ingestion"])

    _wait(ready, "database ready")
    items = [{"id": i, "title": i, "type": "note", "content": {"text": text}} for i, text in ITEMS]
    c.post("/context/ingest", data={"database": "acme", "app_knowledge": json.dumps(items)}).raise_for_status()
    ids = [i for i, _ in ITEMS]

    def completed() -> bool:
        found = c.get("/context/status", params={"database": "acme", "ids": ",".join(ids)}).json()["data"]
        return bool(found) and all(s["indexing_status"] == "completed" for s in found["statuses"])

    _wait(completed, "items completed")
    answer = c.post("/query", json={"database": "acme", "query": QUERY, "max_results": 3})
    answer.raise_for_status()
    return {"items": ids, "query": QUERY, "top_ids": [chunk["id"] for chunk in answer.json()["data"]["chunks"]]}


def main() -> int:
    from ctxstore.adapters.local.data_dir_format import CURRENT, product_version

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / f"datadir-{product_version()}")
    args = parser.parse_args()
    if args.out.exists():
        print(f"{args.out} exists: a release's fixture is written once", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="ctxstore-fixture-") as tmp:
        data_dir, port = Path(tmp) / "data", _free_port()
        proc, key = _serve(data_dir, port)
        try:
            headers = {"Authorization": f"Bearer {key}", "API-Version": "2"}
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
                _wait(lambda: _up(c), "server up", timeout=120)
                expected = _populate(c)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        shutil.copytree(data_dir, args.out, ignore=lambda _d, names: [n for n in names if n in RUNTIME_FILES])
    meta = {"ctxstore": product_version(), "format": CURRENT, "api_key": key, **expected}
    (args.out.parent / f"{args.out.name}.expected.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
