"""Restart time over HTTP: from `ctxstore serve` start to the first answered `POST /query` with graph context.

    uv run python -m bench.ops.restart --data DIR --key csk_... [--database lat] [--rounds 3]

DIR is a data dir written through the API (bench/retrieval/api_latency.py makes one of 100k items; its key is in
the progress.json beside it). Each round starts a server on it, sends the same query (mode fast, graph_context
true) every 20 ms until one answers 200, and stops it with SIGTERM (timed too: the graph engine rewrites its
append-only file at a clean stop). A last round ends with `kill -9` after a burst of writes, and the next start is
timed: it replays what was written since the last rewrite. The reference, measured in the same run, is the same
restart on a data dir of one note (imports, model, engines: the floor a restart cannot go under). Also reported: the
graph engine's own load time (its log line), the AOF's base and increment sizes before each start, /health and
/ready. Writes bench/results/ops_restart.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from tests.support.server import ServerProcess

from bench.api_client import REPO, Api, load

OUT = REPO / "bench" / "results" / "ops_restart.json"
QUERY = "Which proteins regulate cell migration?"


def _aof(data: Path) -> dict[str, int]:
    folder = data / "graph" / "appendonlydir"
    sizes = {"base_bytes": 0, "increment_bytes": 0}
    if folder.is_dir():
        for f in folder.iterdir():
            if ".base." in f.name:
                sizes["base_bytes"] += f.stat().st_size
            elif f.name.endswith(".incr.aof"):
                sizes["increment_bytes"] += f.stat().st_size
    return sizes


def _engine_ready_s(lines: list[str]) -> float | None:
    for line in lines:
        m = re.search(r"graph engine ready in ([0-9.]+) s", line)
        if m:
            return float(m.group(1))
    return None


def _start_and_first_query(data: Path, key: str | None, database: str) -> tuple[ServerProcess, str, dict[str, Any]]:
    t0 = time.perf_counter()
    server = ServerProcess(data)
    marks: dict[str, Any] = {}
    while key is None:  # an empty data dir prints its first key
        if server.printed_keys:
            key = server.printed_keys[0]
        elif server.proc.poll() is not None:
            raise RuntimeError("server exited:\n" + "\n".join(server.lines))
        time.sleep(0.01)
    body = {"database": database, "query": QUERY, "mode": "fast", "graph_context": True, "max_results": 10}
    headers = {"Authorization": f"Bearer {key}", "API-Version": "2"}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=120) as http:
        while True:
            if server.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + "\n".join(server.lines))
            try:
                if "health_s" not in marks and http.get("/health").status_code == 200:
                    marks["health_s"] = round(time.perf_counter() - t0, 3)
                if "health_s" in marks:
                    r = http.post("/query", json=body)
                    if r.status_code == 200:
                        marks["first_query_s"] = round(time.perf_counter() - t0, 3)
                        marks["chunks_returned"] = len(r.json()["data"].get("chunks") or [])
                        break
                    if r.status_code not in (503, 429):
                        raise RuntimeError(f"query answered {r.status_code}: {r.text[:300]}")
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        while http.get("/ready").status_code != 200:
            time.sleep(0.02)
        marks["ready_s"] = round(time.perf_counter() - t0, 3)
    marks["graph_engine_ready_s"] = _engine_ready_s(server.lines)
    return server, key, marks


def _stop(server: ServerProcess) -> float:
    t = time.perf_counter()
    rc = server.stop(signal.SIGTERM, timeout=300)
    if rc != 0:
        raise RuntimeError(f"serve exited {rc} on SIGTERM")
    return round(time.perf_counter() - t, 3)


def _writes(server: ServerProcess, key: str, database: str, n: int) -> None:
    headers = {"Authorization": f"Bearer {key}", "API-Version": "2"}
    items = [{"id": "", "title": "Restart", "type": "note", "content": {"text": "A note written before a kill -9."}}]
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=120) as http:
        for i in range(n):
            items[0]["id"] = f"restart-{time.time_ns()}-{i}"
            r = http.post("/context/ingest", data={"database": database, "app_knowledge": json.dumps(items)})
            assert r.status_code == 202, r.text[:300]


def _prepare_reference(data: Path) -> str:
    """A data dir holding one searchable note (a query needs a database)."""
    with Api(data) as api:
        api.create_db("ref")
        api.ingest_app("ref", [{"id": "n1", "title": "Cells", "type": "note", "content": {"text": "Cells migrate."}}])
        api.wait("ref", {None: ["n1"]}, time.perf_counter(), poll=0.1)
        return api.key


def _round(data: Path, key: str | None, database: str, label: str) -> tuple[str, dict[str, Any]]:
    before = _aof(data)
    server, key, marks = _start_and_first_query(data, key, database)
    marks["stop_s"] = _stop(server)
    marks.update({"round": label, "aof_before_start": before, "load": load()})
    print(json.dumps(marks))
    return key, marks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--key", default=None, help="default: the key in progress.json beside the data dir")
    ap.add_argument("--database", default="lat")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kill-writes", type=int, default=200, help="ingest requests before the kill -9 round")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    key = args.key or json.loads((args.data.parent / "progress.json").read_text())["key"]
    res: dict[str, Any] = {"data_dir": str(args.data), "load_start": load(), "rounds": [], "reference": []}

    with tempfile.TemporaryDirectory() as tmp:  # the floor: the same restart with no data
        empty = Path(tmp) / "data"
        ref_key = _prepare_reference(empty)
        for i in range(args.rounds):
            res["reference"].append(_round(empty, ref_key, "ref", f"empty data dir, restart {i + 1}")[1])
        shutil.rmtree(empty, ignore_errors=True)

    for i in range(args.rounds):
        res["rounds"].append(_round(args.data, key, args.database, f"clean restart {i + 1}")[1])

    # kill -9 after a burst of writes: the next start replays the increment written since the last rewrite
    server, key, _ = _start_and_first_query(args.data, key, args.database)
    _writes(server, key, args.database, args.kill_writes)
    time.sleep(5)  # let the pipeline write some of them to the graph
    server.stop(signal.SIGKILL, timeout=30)
    label = f"restart after kill -9 ({args.kill_writes} ingests)"
    res["rounds"].append(_round(args.data, key, args.database, label)[1])

    ref = sorted(r["first_query_s"] for r in res["reference"])
    got = sorted(r["first_query_s"] for r in res["rounds"][:-1])
    res["summary"] = {
        "first_query_s_median": got[len(got) // 2],
        "reference_first_query_s_median": ref[len(ref) // 2],
        "ratio_to_empty": round(got[len(got) // 2] / ref[len(ref) // 2], 2),
        "after_kill_9_first_query_s": res["rounds"][-1]["first_query_s"],
    }
    res["load_end"] = load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res["summary"], indent=2))


if __name__ == "__main__":
    main()
