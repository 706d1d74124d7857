"""`fast` query latency over HTTP with graph context on, at 20k items ingested with the extractor on (issue 28).

    flock /work/wt/bench.lock uv run python -m bench.retrieval.graph_latency ingest [--budget-s 540]
    flock /work/wt/bench.lock uv run python -m bench.retrieval.graph_latency measure [--label before]

`ingest` sends the items of `api_latency` (the 5,183 SciFact abstracts, then notes of three random
SciFact sentences) through `POST /context/ingest` with the default rule extractor, so relations and
entity groups exist, for at most `--budget-s` seconds per run (the shared machine's lock is held for
under ten minutes); started again with the same `--data` it continues (`progress.json` next to it).
`measure` waits until every accepted item is completed (graph step included), then times unseen SciFact
claims in `fast`, alternating one query with graph context on (the default request) and one with
`graph_context: false`, so the ratio of the two is measured under the same load. Results are appended
to bench/results/graph_context_latency.json with the code's commit.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.api_client import REPO, Api, SciFact, load, pct, read_jsonl
from bench.retrieval.api_latency import _items, _rss_mb

OUT = REPO / "bench" / "results" / "graph_context_latency.json"
BATCH = 100


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "layers"], cwd=REPO, capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def ingest(api: Api, progress: dict[str, Any], progress_path: Path, target: int, budget_s: float) -> None:
    sf = SciFact.load()
    t0 = time.perf_counter()
    while progress["sent"] < target and time.perf_counter() - t0 < budget_s:
        n = min(BATCH, target - progress["sent"])
        api.ingest_app("glat", _items(sf, progress["sent"], n), batch=BATCH)
        progress["sent"] += n
        progress_path.write_text(json.dumps(progress))
        if progress["sent"] % 1000 == 0:  # keep the queue at most ~1,000 items ahead of the graph step
            ids = [it["id"] for it in _items(sf, progress["sent"] - 1000, 100)]
            api.wait(
                "glat",
                {None: ids},
                time.perf_counter(),
                poll=2.0,
                limit_s=max(1.0, budget_s - (time.perf_counter() - t0)),
            )
    print(json.dumps({"sent": progress["sent"], "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


def measure(
    api: Api, progress: dict[str, Any], label: str, n: int, backlog: bool = False, wait_s: float = 300
) -> dict[str, Any]:
    """`backlog`: time the queries at once, while the graph step of earlier ingestion still runs."""
    sf = SciFact.load()
    ids = [it["id"] for it in _items(sf, 0, progress["sent"])]
    t0 = time.perf_counter()
    if backlog:
        waited = api.wait("glat", {None: ids}, t0, until="searchable")
    else:
        waited = api.wait("glat", {None: ids}, t0, poll=5.0, limit_s=wait_s)
    claims = [q["text"] for q in read_jsonl(REPO.parent / "shared" / "data" / "beir_scifact" / "queries.jsonl")]
    random.Random(28).shuffle(claims)
    runs = progress.setdefault("runs", [])
    queries = (claims[200 * len(runs) :] + claims)[: 2 * n]
    res: dict[str, Any] = {
        "label": label,
        "graph_step_backlog": backlog,
        "code": _commit(),
        "items": progress["sent"],
        "completed_items": waited["completed_items"],
        "load": load(),
    }
    for graph in (True, False):  # warm both paths (vector scope, graph engine) outside the timings
        api.query({"database": "glat", "query": "warm up the caches", "mode": "fast", "graph_context": graph})
    lat: dict[bool, list[float]] = {True: [], False: []}
    groups = []
    for i, q in enumerate(queries):
        graph = i % 2 == 0
        dt, data = api.query(
            {"database": "glat", "query": q, "mode": "fast", "max_results": 10, "graph_context": graph}
        )
        lat[graph].append(dt)
        if graph:
            gc = data.get("graph_context") or {}
            groups.append(len(gc.get("chunk_relations") or []) + len(gc.get("query_paths") or []))
    for graph, name in ((True, "fast_graph_context"), (False, "fast_no_graph_context")):
        res[name] = {"p50_ms": pct(lat[graph], 50), "p95_ms": pct(lat[graph], 95), "n": len(lat[graph])}
    res["ratio_p50"] = round(res["fast_graph_context"]["p50_ms"] / res["fast_no_graph_context"]["p50_ms"], 2)
    res["queries_with_graph_groups"] = sum(1 for g in groups if g)
    res["mean_graph_groups"] = round(sum(groups) / len(groups), 1)
    res["load_after"] = load()
    res["rss_mb_after_queries"] = _rss_mb(api.server.proc.pid)
    runs.append(res)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("ingest", "measure"))
    ap.add_argument("--target", type=int, default=20_000)
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--label", default="")
    ap.add_argument("-n", type=int, default=150, help="queries per arm in `measure`")
    ap.add_argument(
        "--backlog",
        action="store_true",
        help="`measure` first while the graph step of earlier ingestion still runs, then again once it is done",
    )
    ap.add_argument("--data", type=Path, default=Path.home() / ".cache" / "ctxstore-graph-latency" / "data")
    ap.add_argument("--wait-s", type=float, default=300, help="`measure`: wait this long for the graph step first")
    args = ap.parse_args()
    progress_path = args.data.parent / "progress.json"
    progress: dict[str, Any] = json.loads(progress_path.read_text()) if progress_path.exists() else {"sent": 0}
    fresh = not args.data.exists()
    args.data.parent.mkdir(parents=True, exist_ok=True)
    with Api(args.data, key=progress.get("key")) as api:
        progress["key"] = api.key
        if fresh:
            api.create_db("glat")
        api.http.timeout = 600
        if args.phase == "ingest":
            ingest(api, progress, progress_path, args.target, args.budget_s)
            progress_path.write_text(json.dumps(progress))
            return
        if args.backlog:
            print(json.dumps(measure(api, progress, args.label, args.n, backlog=True)), flush=True)
        res = measure(api, progress, args.label, args.n, wait_s=args.wait_s)
    progress_path.write_text(json.dumps(progress))
    # The server's key stays in progress.json (next to the data dir), never in the results.
    OUT.write_text(json.dumps({k: v for k, v in progress.items() if k != "key"}, indent=2) + "\n")
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
