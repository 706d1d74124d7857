"""Where the time of one `fast` query at 100k chunks goes: perf_counter probes around each stage.

    uv run python -m bench.retrieval.stages [--data-dir DIR] [--queries 150]
    CTXSTORE_VECTOR_ANN_MIN_ROWS=20000 uv run python -m bench.retrieval.stages \
        --data-dir /work/benchdata/r1m-mix/data --database lat --no-http    # the 1M diagnostic, HNSW lane

Builds the 100k latency corpus of bench/retrieval/run.py (or reuses --data-dir, built on first use),
runs `fast` queries in-process through QueryService.query with probes wrapped around the embedder,
both index lanes, fusion, the chunk/record lookups and response building, then the same number of
queries over HTTP against a `ctxstore serve` subprocess on the same data dir (HTTP overhead =
HTTP p50 - in-process p50). Every query text is new to the process (no embedding cache hits).
The keyword lane runs on a worker thread while the query is embedded, so stages overlap: the wall
column is the whole query. Writes bench/results/retrieval_stages.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.retrieval.baselines import load_jsonl
from bench.retrieval.run import REPO, SCIFACT, Local, _post, build_latency_corpus
from tests.support.server import ServerProcess

from ctxstore.retrieval import hybrid
from ctxstore.retrieval.fusion import fuse
from ctxstore.services.query import service as query_module

RESULTS = REPO / "bench" / "results" / "retrieval_stages.json"
DATABASE = "lat100k"


def _probe(times: dict[str, list[float]], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times[name].append(time.perf_counter() - start)

    return wrapped


def in_process(data_dir: Path, queries: list[str], database: str = DATABASE) -> dict[str, list[float]]:
    local = Local(data_dir)
    times: dict[str, list[float]] = defaultdict(list)
    try:
        embedder, index = local.container.embedder, local.index
        assert embedder is not None and local.services.query is not None
        svc = local.services.query
        local.query(database=database, query="warm up the caches", mode="fast")
        ann = getattr(index, "_ann", None)  # the HNSW lane, when on: loaded in the background after a first query
        if ann is not None:
            ann.wait(600)
        # Instance attributes shadow the methods; module functions are patched where they are looked up.
        embedder.embed_query = _probe(times, "embedding", embedder.embed_query)  # type: ignore[method-assign]
        index.keyword_search = _probe(times, "keyword lane", index.keyword_search)  # type: ignore[method-assign]
        index.vector_search = _probe(times, "vector lane", index.vector_search)  # type: ignore[method-assign]
        index.get_chunks = _probe(times, "chunk lookup", index.get_chunks)  # type: ignore[method-assign]
        run_lanes = hybrid.HybridRetriever.run
        setattr(query_module, "fuse", _probe(times, "fusion", fuse))  # noqa: B010 - patched where it is looked up
        hybrid.HybridRetriever.run = _probe(times, "lanes (wall)", run_lanes)  # type: ignore[method-assign]
        svc._live = _probe(times, "liveness (records)", svc._live)  # type: ignore[method-assign]
        svc._graph_context = _probe(times, "graph context", svc._graph_context)  # type: ignore[method-assign]
        svc._render = _probe(times, "response building (incl. lookups)", svc._render)  # type: ignore[method-assign]
        try:
            for q in queries:
                start = time.perf_counter()
                local.query(database=database, query=q, mode="fast", max_results=10)
                times["service total"].append(time.perf_counter() - start)
        finally:
            setattr(query_module, "fuse", fuse)  # noqa: B010
            hybrid.HybridRetriever.run = run_lanes  # type: ignore[method-assign]
    finally:
        local.close()
    return times


def over_http(data_dir: Path, key: str, queries: list[str], database: str = DATABASE) -> list[float]:
    server = ServerProcess(data_dir)
    try:
        server.wait_ready(120)
        with server.client(key) as client:
            _post(client, database, "warm up the caches", "fast")
            return [_post(client, database, q, "fast") for q in queries]
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="reuse (or build once) the 100k corpus here")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument("--no-http", action="store_true", help="the in-process stages only")
    args = parser.parse_args()
    texts = [q["text"] for q in load_jsonl(SCIFACT / "queries.jsonl")]
    random.Random(17).shuffle(texts)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        key_file = data_dir.parent / f"{data_dir.name}.key"
        if not key_file.exists():
            key_file.write_text(build_latency_corpus(data_dir, [100_000]), encoding="utf-8")
        key = key_file.read_text(encoding="utf-8").strip()
        load_start = os.getloadavg()
        stages = in_process(data_dir, texts[: args.queries], args.database)
        http = [] if args.no_http else over_http(data_dir, key, texts[args.queries : 2 * args.queries], args.database)
    ms = {name: round(statistics.median(v) * 1000, 2) for name, v in stages.items()}
    if http:
        ms["HTTP total"] = round(statistics.median(http) * 1000, 2)
        ms["HTTP overhead (HTTP - service)"] = round(ms["HTTP total"] - ms["service total"], 2)
    result = {
        "database": args.database,
        "queries": args.queries,
        "p50_ms": ms,
        "calls_per_query": {name: round(len(v) / args.queries, 2) for name, v in stages.items()},
        "load_avg": {"start": load_start, "end": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print("| stage (fast, 100k, in-process unless HTTP) | p50 ms | calls/query |\n|---|---|---|")
    for name, value in ms.items():
        calls = result["calls_per_query"].get(name, 1)
        print(f"| {name} | {value} | {calls} |")
    print(f"load average {load_start} -> {os.getloadavg()}; wrote {args.out}")


if __name__ == "__main__":
    main()
