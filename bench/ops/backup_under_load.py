"""Backup under load (issue 27, part 2): `ctxstore backup` of a serving, ingesting data dir, and its restore.

    uv run python -m bench.ops.backup_under_load [--docs 5000] [--batch 25]

One `ctxstore serve` on a fresh data dir (bench/api_client.py). A writer sends SciFact notes in steady requests
of --batch items; a reader sends SciFact test queries one after another. Once a third of the notes are
acknowledged (and 30 s have passed), `ctxstore backup` runs (its own
process, as an operator would) while both go on: queries started during it are the "during" window, those of
the 30 s just before it the "before" window.
The run then stops the server, restores the backup into a new data dir (`ctxstore restore`) and starts a
server on it: the time to /health, to /ready and to a first answered query. Reports backup time and size,
query p50/p95 before and during the backup with their ratio (same run, same load), restore time, the
restored server's start times and the load averages. Writes bench/results/ops_backup.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from tests.support.server import ServerProcess

from bench.api_client import Api, SciFact, pct

ROOT = Path(__file__).resolve().parents[2]
BEFORE_S = 30.0


def _loads() -> list[float]:
    import os

    return [round(x, 2) for x in os.getloadavg()]


def _cli(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ctxstore.cli", *args], capture_output=True, text=True, timeout=900)
    return time.perf_counter() - t, proc


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Load:
    """The writer and reader threads; each query's (start time, latency ms)."""

    def __init__(self, api: Api, sf: SciFact, batch: int) -> None:
        self.api, self.sf, self.batch = api, sf, batch
        self.acked = 0
        self.queries: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write), threading.Thread(target=self._read)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def _write(self) -> None:
        items = self.sf.items()
        for s in range(0, len(items), self.batch):
            if self.stop.is_set():
                return
            self.api.ingest_app("scifact", items[s : s + self.batch], batch=self.batch)
            self.acked = s + len(items[s : s + self.batch])

    def _read(self) -> None:
        texts = list(self.sf.queries.values())
        with httpx.Client(base_url=self.api.server.base_url, headers=self.api.http.headers, timeout=120) as c:
            n = 0
            while not self.stop.is_set():
                t = time.perf_counter()
                r = c.post("/query", json={"database": "scifact", "query": texts[n % len(texts)]})
                if r.status_code == 200:
                    self.queries.append((t, (time.perf_counter() - t) * 1000))
                n += 1


def _window(queries: list[tuple[float, float]], start: float, end: float) -> dict[str, Any]:
    ms = [q for t, q in queries if start <= t < end]
    return {"queries": len(ms), "p50_ms": round(pct(ms, 50), 1), "p95_ms": round(pct(ms, 95), 1)}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sf = SciFact.load(args.docs)
    source, backup, restored = work / "source", work / "backup", work / "restored"
    res: dict[str, Any] = {"docs": len(sf.docs), "batch": args.batch, "load_at_start": _loads()}
    with Api(source) as api:
        key = api.key
        api.create_db("scifact")
        load = Load(api, sf, args.batch)
        t0 = time.perf_counter()
        load.start()
        # A third of the notes acknowledged and BEFORE_S of steady load: the "before" window is its last BEFORE_S.
        while (load.acked < len(sf.docs) // 3 or time.perf_counter() - t0 < BEFORE_S) and load.threads[0].is_alive():
            time.sleep(0.2)
        res["acked_before_backup"] = load.acked
        b0 = time.perf_counter()
        backup_s, proc = _cli("backup", "--data-dir", str(source), "--to", str(backup))
        b1 = time.perf_counter()
        assert proc.returncode == 0, proc.stderr
        res["backup_line"] = proc.stdout.strip()
        res["load_during_backup"] = _loads()
        time.sleep(min(10.0, backup_s))  # keep loading a little after it, then stop
        load.join()
        res["acked_total"] = load.acked
        res["backup_s"] = round(backup_s, 2)
        res["backup_mb"] = round(_size(backup) / 1e6, 1)
        res["source_mb_at_end"] = round(_size(source) / 1e6, 1)
        res["query_before"] = _window(load.queries, b0 - BEFORE_S, b0)
        res["query_during"] = _window(load.queries, b0, b1)
        before, during = res["query_before"], res["query_during"]
        res["p50_ratio_during_vs_before"] = round(during["p50_ms"] / before["p50_ms"], 2) if before["p50_ms"] else None
        res["p95_ratio_during_vs_before"] = round(during["p95_ms"] / before["p95_ms"], 2) if before["p95_ms"] else None
    restore_s, proc = _cli("restore", str(backup), "--data-dir", str(restored))
    assert proc.returncode == 0, proc.stderr
    res["restore_s"] = round(restore_s, 2)
    t = time.perf_counter()
    with ServerProcess(restored) as srv:
        srv.wait_ready(300)
        res["restored_health_s"] = round(time.perf_counter() - t, 2)
        while httpx.get(srv.base_url + "/ready", timeout=10).status_code != 200:
            time.sleep(0.05)
        res["restored_ready_s"] = round(time.perf_counter() - t, 2)
        with srv.client(key) as c:
            r = c.post("/query", json={"database": "scifact", "query": next(iter(sf.queries.values()))})
            assert r.status_code == 200, r.text
            res["restored_first_query_s"] = round(time.perf_counter() - t, 2)
        srv.stop()
    res["load_at_end"] = _loads()
    return res


def _joined(res: dict[str, Any], *names: str) -> str:
    return ", ".join(str(res[f"restored_{n}_s"]) for n in names)


def table(res: dict[str, Any]) -> str:
    b, d = res["query_before"], res["query_during"]
    rows = [
        ("docs acked before backup / total", f"{res['acked_before_backup']} / {res['acked_total']}"),
        ("backup time (s)", res["backup_s"]),
        ("backup size (MB)", res["backup_mb"]),
        ("query p50 before / during (ms)", f"{b['p50_ms']} / {d['p50_ms']}  (x{res['p50_ratio_during_vs_before']})"),
        ("query p95 before / during (ms)", f"{b['p95_ms']} / {d['p95_ms']}  (x{res['p95_ratio_during_vs_before']})"),
        ("queries before / during", f"{b['queries']} / {d['queries']}"),
        ("restore time (s)", res["restore_s"]),
        ("restored: /health, /ready, first query (s)", _joined(res, "health", "ready", "first_query")),
        (
            "load avg start / backup / end",
            f"{res['load_at_start']} / {res['load_during_backup']} / {res['load_at_end']}",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=5000, help="SciFact notes to send (the corpus has 5,183)")
    ap.add_argument("--batch", type=int, default=25, help="notes per ingest request")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ops_backup.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxstore-backup-bench-") as tmp:
        res = run(args, Path(tmp))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(table(res))


if __name__ == "__main__":
    main()
