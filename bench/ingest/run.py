"""Ingestion benchmark: time until a batch is searchable and completed, next to the bare embedder.

Runs a real `ctxstore serve` on a fresh data dir and talks to it over HTTP.
    uv run python -m bench.ingest.run [--phases scifact,plain,memory,docs] [--scifact-docs N] [--items 1000]

scifact: the 5,183 SciFact abstracts as app_knowledge notes (requests of 100), timed from the first
request until every item is searchable (`graph_creation`/`completed`) and until every one is completed;
the bare embedder (the server's model alone, one text per call, in this process while the server is
idle) embeds the same texts before and after, and the report gives searchable time / embedder time.
Writes bench/results/ingest.json and prints a report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from tests.support.server import ServerProcess

from bench.api_client import Api, SciFact, bare_embedder, load

ROOT = Path(__file__).resolve().parents[2]
PARSER_DOCS = ROOT.parent / "shared" / "data" / "parser_docs"
WORDS = [
    "context",
    "store",
    "retrieval",
    "memory",
    "graph",
    "vector",
    "keyword",
    "hybrid",
    "chunk",
    "index",
    "query",
    "latency",
    "throughput",
    "ingestion",
    "pipeline",
    "parser",
    "embedding",
    "collection",
    "database",
    "organisation",
    "relation",
    "entity",
]


def _text(i: int, words: int = 180) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(words)) + f". Item {i} ends here."


def _wait_ready(c: httpx.Client, db: str) -> None:
    while not c.get("/databases/status", params={"database": db}).json()["data"]["infra"]["ready_for_ingestion"]:
        time.sleep(0.05)


def _statuses(c: httpx.Client, db: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for s in range(0, len(ids), 200):
        r = c.get("/context/status", params={"database": db, "ids": ",".join(ids[s : s + 200])})
        out.update({x["id"]: x for x in r.json()["data"]["statuses"]})
    return out


def _wait_done(c: httpx.Client, db: str, ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    deadline = time.time() + timeout
    while True:
        st = _statuses(c, db, ids)
        if all(v["indexing_status"] in ("completed", "errored") for v in st.values()) or time.time() > deadline:
            return st
        # Each poll reads every status (1,000 ids): polling 5x a second took ~20% of a core from the server.
        time.sleep(1.0)


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _children(pid: int) -> dict[int, str]:
    out: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) != pid:
                continue
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        out[int(proc.name)] = "extraction" if b"multiprocessing" in b" ".join(cmd) else Path(cmd[0].decode()).name
    return out


def bench_plain(c: httpx.Client, n: int) -> dict[str, Any]:
    c.post("/databases", json={"database": "plain"})
    _wait_ready(c, "plain")
    ids = [f"p{i}" for i in range(n)]
    t0 = time.perf_counter()
    for s in range(0, n, 100):
        items = [
            {"id": i, "title": f"Doc {i}", "type": "note", "content": {"text": _text(int(i[1:]))}}
            for i in ids[s : s + 100]
        ]
        r = c.post("/context/ingest", data={"database": "plain", "app_knowledge": json.dumps(items)})
        assert r.status_code == 202, r.text
    accepted = time.perf_counter() - t0
    st = _wait_done(c, "plain", ids, timeout=1800)
    total = time.perf_counter() - t0
    chunks = sum(int(v.get("chunk_count") or 0) for v in st.values())
    done = sum(1 for v in st.values() if v["indexing_status"] == "completed")
    return {
        "items": n,
        "completed": done,
        "chunks": chunks,
        "accept_s": round(accepted, 2),
        "total_s": round(total, 2),
        "docs_per_s": round(done / total, 1),
        "chunks_per_s": round(chunks / total, 1),
    }


def bench_parser_docs(c: httpx.Client) -> dict[str, Any]:
    c.post("/databases", json={"database": "docs"})
    _wait_ready(c, "docs")
    bookkeeping = {"index.json", "expectations.json", "expectations_detail.json"}
    files = sorted(
        p
        for p in PARSER_DOCS.rglob("*")
        if p.is_file() and p.name not in bookkeeping and "expected_outputs" not in p.parts
    )
    t0 = time.perf_counter()
    ids: list[str] = []
    for p in files:
        r = c.post(
            "/context/ingest",
            data={"database": "docs"},
            files=[("documents", (p.name, p.read_bytes(), "application/octet-stream"))],
        )
        for res in r.json()["data"]["results"]:
            if res["status"] == "queued":
                ids.append(res["id"])
    st = _wait_done(c, "docs", ids, timeout=1800)
    total = time.perf_counter() - t0
    done = sum(1 for v in st.values() if v["indexing_status"] == "completed")
    errored = sorted(v["id"] for v in st.values() if v["indexing_status"] == "errored")
    chunks = sum(int(v.get("chunk_count") or 0) for v in st.values())
    return {
        "files_sent": len(files),
        "accepted": len(ids),
        "completed": done,
        "errored": len(errored),
        "chunks": chunks,
        "total_s": round(total, 2),
        "docs_per_s": round(done / total, 2),
        "chunks_per_s": round(chunks / total, 1),
    }


def bench_memory_latency(c: httpx.Client, n: int) -> dict[str, Any]:
    c.post("/databases", json={"database": "mem"})
    _wait_ready(c, "mem")
    lat: list[float] = []
    for i in range(n):
        mid = f"m{i}"
        t0 = time.perf_counter()
        c.post(
            "/context/ingest",
            data={
                "database": "mem",
                "type": "memory",
                "memories": json.dumps(
                    [{"id": mid, "text": f"I prefer green tea in the morning, note {i}.", "infer": True}]
                ),
            },
        )
        while True:
            s = c.get("/context/status", params={"database": "mem", "ids": mid}).json()["data"]["statuses"][0]
            if s["indexing_status"] in ("graph_creation", "completed", "errored"):
                break
            time.sleep(0.01)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    return {
        "memories": n,
        "p50_s": round(statistics.median(lat), 3),
        "p95_s": round(lat[max(0, int(len(lat) * 0.95) - 1)], 3),
        "max_s": round(lat[-1], 3),
    }


def bench_scifact(n_docs: int, rounds: int) -> dict[str, Any]:
    """SciFact through the API, alternating with the bare embedder on the same texts: E, C, E, C, ..., E."""
    sf = SciFact.load(n_docs)
    texts = sf.texts()
    out: dict[str, Any] = {"docs": len(sf.docs), "embedder": [bare_embedder(texts)], "rounds": []}
    print(f"  bare embedder: {out['embedder'][-1]}", flush=True)
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp, Api(Path(tmp) / "data") as api:
            _, rnd = api.timed_scifact(sf)
            rnd["docs_per_s_completed"] = round(len(sf.docs) / rnd["completed_s"], 1)
            rnd["graph_share_of_completed"] = round(1 - rnd["searchable_s"] / rnd["completed_s"], 3)
            rnd["server_peak_rss_mb"] = round(_peak_rss_mb(api.server.proc.pid), 1)
            out["rounds"].append(rnd)
            print(f"  ctxstore: {rnd}", flush=True)
        out["embedder"].append(bare_embedder(texts))
        print(f"  bare embedder: {out['embedder'][-1]}", flush=True)
    for i, rnd in enumerate(out["rounds"]):
        # The reference for a round: the mean rate of the embedder runs right before and after it.
        rate = (out["embedder"][i]["texts_per_s"] + out["embedder"][i + 1]["texts_per_s"]) / 2
        rnd["embedder_s_same_texts"] = round(len(texts) / rate, 1)
        rnd["searchable_vs_embedder"] = round(rnd["searchable_s"] / rnd["embedder_s_same_texts"], 3)
        rnd["completed_vs_embedder"] = round(rnd["completed_s"] / rnd["embedder_s_same_texts"], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", default="scifact,plain,memory,docs")
    ap.add_argument("--scifact-docs", type=int, default=0, help="first N SciFact docs (0: all 5,183)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--memories", type=int, default=30)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ingest.json")
    args = ap.parse_args()
    phases = args.phases.split(",")
    result: dict[str, Any] = {"machine": "2 cores", "load_at_start": load()}
    if "scifact" in phases:
        print("SciFact through the API, next to the bare embedder", flush=True)
        result["scifact"] = bench_scifact(args.scifact_docs, args.rounds)
    if {"plain", "memory", "docs"} & set(phases):
        with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp) / "data") as srv:
            srv.wait_ready(60)
            [key] = srv.printed_keys
            with srv.client(key) as c:
                c.timeout = httpx.Timeout(120)
                if "plain" in phases:
                    result["plain_text"] = bench_plain(c, args.items)
                if "memory" in phases:
                    result["memory_searchable"] = bench_memory_latency(c, args.memories)
                if "docs" in phases and PARSER_DOCS.exists():
                    result["parser_docs"] = bench_parser_docs(c)
                result["server_peak_rss_mb"] = round(_peak_rss_mb(srv.proc.pid), 1)
                # The server's own children: the embedded graph engine and the extraction process.
                result["children_peak_rss_mb"] = {
                    name: round(_peak_rss_mb(pid), 1) for pid, name in _children(srv.proc.pid).items()
                }
            srv.stop()
    result["load_at_end"] = load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
