"""Query latency over HTTP on a corpus ingested through the API, at growing sizes (10k, 30k, 100k, 300k, 1M).

    nohup uv run python -m bench.retrieval.api_latency [--target 1000000] [--data DIR] > latency.log &

Items are sent through `POST /context/ingest` as app_knowledge notes of one chunk each: the 5,183
SciFact abstracts, then notes of three random SciFact sentences. At each checkpoint the sender stops,
waits until every accepted item is searchable, and times unseen SciFact claims through `POST /query`
(`fast` and `thinking`, one client, keep-alive), with the server's resident memory. The data dir and
`progress.json` in it persist: killed and started again with the same `--data`, the run continues from
the last accepted request (accepted work survives in the server's queue) and keeps earlier checkpoints.
The graph extractor is off (CTXSTORE_EXTRACTOR=none) so that the hours of ingestion go to what
searchability needs; the graph step still runs (item nodes). Writes bench/results/retrieval_latency_api.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.api_client import REPO, Api, SciFact, load, pct, read_jsonl

CHECKPOINTS = (10_000, 30_000, 100_000, 300_000, 1_000_000)
OUT = REPO / "bench" / "results" / "retrieval_latency_api.json"
BATCH = 100


def _rss_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return out


def _items(sf: SciFact, start: int, n: int) -> list[dict[str, Any]]:
    """Items start..start+n of the corpus (deterministic: item i is always the same text)."""
    sentences = [s for d in sf.docs for s in re.split(r"(?<=[.!?])\s+", d["text"]) if len(s) > 30]
    out = []
    for i in range(start, start + n):
        if i < len(sf.docs):
            d = sf.docs[i]
            out.append(
                {"id": d["_id"], "title": d.get("title") or d["_id"], "type": "note", "content": {"text": d["text"]}}
            )
        else:
            rng = random.Random(i)
            text = " ".join(rng.sample(sentences, 3))
            out.append({"id": f"syn{i}", "title": f"Note {i}", "type": "note", "content": {"text": text}})
    return out


def _measure(api: Api, queries: list[str], size: int, n_fast: int = 150) -> dict[str, Any]:
    res: dict[str, Any] = {"chunks": size, "load": load(), "rss_mb": _rss_mb(api.server.proc.pid)}
    api.query({"database": "lat", "query": "warm up the caches", "mode": "fast", "max_results": 10})
    for mode, n in (("fast", n_fast), ("thinking", 50)):
        lat = []
        for q in queries[:n]:
            dt, _ = api.query({"database": "lat", "query": q, "mode": mode, "max_results": 10})
            lat.append(dt)
        del queries[:n]
        res[mode] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "n": n}
    res["load_after"] = load()
    res["rss_mb_after_queries"] = _rss_mb(api.server.proc.pid)  # the vector cache loads on the first query
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=int, default=1_000_000)
    ap.add_argument("--data", type=Path, default=Path.home() / ".cache" / "ctxstore-latency" / "data")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--remeasure",
        action="store_true",
        help="no ingestion: time queries on the data dir as it stands with this checkout's server (after an"
        " optimisation); the run is added under 'remeasured' with the commit",
    )
    args = ap.parse_args()
    progress_path = args.data.parent / "progress.json"
    progress: dict[str, Any] = (
        json.loads(progress_path.read_text()) if progress_path.exists() else {"sent": 0, "checkpoints": []}
    )
    sf = SciFact.load()
    claims = [q["text"] for q in read_jsonl(REPO.parent / "shared" / "data" / "beir_scifact" / "queries.jsonl")]
    random.Random(11).shuffle(claims)
    done = {c["chunks"] for c in progress["checkpoints"]}
    queries = claims[200 * len(done) :] + claims  # unseen texts first at every checkpoint
    if args.remeasure:
        _remeasure(args, progress, progress_path, claims)
        return
    fresh = not args.data.exists()
    with Api(args.data, env={"CTXSTORE_EXTRACTOR": "none"}, key=progress.get("key")) as api:
        progress["key"] = api.key
        if fresh:
            api.create_db("lat")
        api.http.timeout = 600
        for checkpoint in [c for c in CHECKPOINTS if c <= args.target and c not in done]:
            t0 = time.perf_counter()
            sent0 = progress["sent"]
            while progress["sent"] < checkpoint:
                n = min(BATCH, checkpoint - progress["sent"])
                api.ingest_app("lat", _items(sf, progress["sent"], n), batch=BATCH)
                progress["sent"] += n
                progress_path.write_text(json.dumps(progress))
                # Keep the queue short (at most ~2,000 items ahead): a client feeding a live server.
                if progress["sent"] % 2000 == 0:
                    ids = [it["id"] for it in _items(sf, progress["sent"] - 100, 100)]
                    api.wait("lat", {None: ids}, time.perf_counter(), poll=2.0)
            ids = [it["id"] for it in _items(sf, checkpoint - 200, 200)]
            api.wait("lat", {None: ids}, time.perf_counter(), poll=2.0)
            ingest_s = time.perf_counter() - t0
            res = _measure(api, queries, checkpoint)
            res["ingest_chunks_per_s_since_last"] = round((checkpoint - sent0) / ingest_s, 1)
            progress["checkpoints"].append(res)
            progress_path.write_text(json.dumps(progress))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            # The server's key stays in progress.json (next to the data dir), never in the results.
            results = {k: v for k, v in progress.items() if k != "key"}
            args.out.write_text(json.dumps(results, indent=2) + "\n")
            print(json.dumps(res), flush=True)


def _remeasure(args: argparse.Namespace, progress: dict[str, Any], progress_path: Path, claims: list[str]) -> None:
    """Queries the ingested data have not seen yet in any earlier measurement come first."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "layers"], cwd=REPO, capture_output=True, text=True)
    runs = progress.setdefault("remeasured", [])
    offset = 200 * (len(progress["checkpoints"]) + len(runs))
    queries = (claims[offset:] + claims)[:400]
    with Api(args.data, env={"CTXSTORE_EXTRACTOR": "none"}, key=progress["key"]) as api:
        t0 = time.perf_counter()
        # Work an earlier run left queued (index and graph steps) ends first: it would run beside the queries.
        last = max((c["chunks"] for c in progress["checkpoints"]), default=0)
        ids = [it["id"] for it in _items(SciFact.load(), last, progress["sent"] - last)]
        api.wait("lat", {None: ids}, t0, poll=5.0)
        res = _measure(api, queries, progress["sent"], n_fast=300)
    res["code"] = commit.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
    runs.append(res)
    progress_path.write_text(json.dumps(progress))
    args.out.write_text(json.dumps({k: v for k, v in progress.items() if k != "key"}, indent=2) + "\n")
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
