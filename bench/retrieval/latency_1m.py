"""Diagnostic (the index is written directly, not ingested): query latency and memory at 1M chunks over HTTP.

    uv run python -m bench.retrieval.latency_1m [--source ~/.cache/ctxstore-latency/data] [--chunks 1000000]

Ingesting 1M chunks through the API takes about 5.5 hours on this machine (~50 chunks/s, bound by the
embedder), beyond a session. This shows how query cost grows past the 100k corpus of api_latency.py: it
copies that data dir (100k chunks ingested through the API), then writes the rest straight into the local
search index (SqliteSearchIndex.upsert, the call the pipeline's index step makes) as notes of three random
SciFact sentences, each with a vector made from a real ingested vector plus Gaussian noise (sigma 1/sqrt(dim)
per component before normalising: cosine ~0.71 to its source), in the same database. Then a fresh `ctxstore
serve` answers unseen SciFact claims through POST /query as api_latency.py measures them (fast and
thinking, one keep-alive client, resident memory after the queries), after a first query that loads the
scope's vectors (timed on its own). Writes bench/results/retrieval_latency_1m.json.

    uv run python -m bench.retrieval.latency_1m --work /work/benchdata/r1m-mix/data --ann-min-rows 20000 \
        --reference /work/benchdata/r100k/data --out bench/results/retrieval_latency_1m_hnsw.json

`--ann-min-rows` turns the HNSW lane on (CTXSTORE_VECTOR_ANN_MIN_ROWS). When the scope has no saved index yet,
the server builds it in the background after the first query (answering by the shortlist meanwhile); the run
waits for the file, stops the server cleanly and measures a fresh start on it: the first query's time is then
a restart with the index on disk. Use it on a data dir grown with real-shaped vectors (mix_1m.py): on noisy
copies HNSW finds a fraction of the neighbours. `--reference` measures the same queries on the 100k data dir
with the same settings in the same run, for ratios (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench.api_client import REPO, Api, SciFact, load
from bench.retrieval.api_latency import _measure, _rss_mb

from ctxstore.adapters.local.ann_index import FORMAT, SUFFIX
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc

OUT = REPO / "bench" / "results" / "retrieval_latency_1m.json"
BATCH = 2000


def _grow(data: Path, target: int, seed: int = 3) -> dict[str, Any]:
    conn = sqlite3.connect(data / "search.db")
    org, database, collection, store = conn.execute(
        "SELECT org, database, collection, store FROM chunks WHERE database='lat' LIMIT 1"
    ).fetchone()
    have = int(conn.execute("SELECT count(*) FROM chunks WHERE database='lat'").fetchone()[0])
    sources = np.stack(
        [
            np.frombuffer(blob, dtype=np.float32)
            for (blob,) in conn.execute("SELECT vector FROM chunks WHERE database='lat' AND vector IS NOT NULL")
        ]
    )
    conn.close()
    sf = SciFact.load()
    sentences = [s for d in sf.docs for s in re.split(r"(?<=[.!?])\s+", d["text"]) if len(s) > 30]
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    idx = SqliteSearchIndex(data / "search.db")
    t0 = time.perf_counter()
    written = 0
    while have + written < target:
        n = min(BATCH, target - have - written)
        picks = nrng.integers(0, len(sources), size=n)
        vecs = sources[picks] + nrng.normal(0.0, 1.0 / np.sqrt(sources.shape[1]), size=(n, sources.shape[1]))
        vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
        docs = []
        for j in range(n):
            i = have + written + j
            text = " ".join(rng.sample(sentences, 3))
            docs.append(ChunkDoc(f"big{i}#0", f"big{i}", database, collection, store, text, vecs[j], title=f"Note {i}"))
        idx.upsert(org, docs)
        written += n
        if written % 100_000 < BATCH:
            print(f"  {have + written} chunks, {written / (time.perf_counter() - t0):.0f} rows/s", flush=True)
    idx.close()
    return {"chunks_from_api": have, "chunks_written_directly": written, "write_s": round(time.perf_counter() - t0, 1)}


def _add_records(data: Path) -> dict[str, Any]:
    """Item records for the rows written straight into the index, as ingestion would have left them.

    Without them the query's liveness check finds no item behind 90 % of the hits, drops them and reads
    window after window of further candidates (40 chunk lookups a query): a cost a real 1M store does not
    have, while its records file would be ten times larger than the 100k one. Each record copies an ingested
    note's record with the row's id, title and time (idempotent: INSERT OR IGNORE)."""
    t0 = time.perf_counter()
    rec = sqlite3.connect(data / "records.db")
    org, pk, body = rec.execute(
        "SELECT org, pk, body FROM records WHERE kind='item' AND pk LIKE 'lat%' AND body LIKE '%\"app_type\":\"note\"%'"
        " LIMIT 1"
    ).fetchone()
    template = json.loads(body)
    idx = sqlite3.connect(data / "search.db")
    written = 0
    rows = idx.execute("SELECT item_id, title, created_at FROM chunks WHERE item_id LIKE 'big%'")
    while batch := rows.fetchmany(BATCH):
        out = []
        for item_id, title, created in batch:
            created = created or template["created_at"]  # the rows were written without a time
            version = f"0{int(created * 1e9):020d}-bench"
            body = {**template, "id": item_id, "title": title, "timestamp": created, "created_at": created}
            body.update(updated_at=created, version=version, blob_key=f"lat/_default/knowledge/{item_id}/{version}")
            out.append((org, "item", pk, item_id, 1, json.dumps(body)))
        rec.executemany("INSERT OR IGNORE INTO records (org, kind, pk, sk, version, body) VALUES (?,?,?,?,?,?)", out)
        rec.commit()
        written += len(out)
    idx.close()
    rec.close()
    return {"records_written": written, "records_s": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=Path.home() / ".cache" / "ctxstore-latency" / "data")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "ctxstore-latency-1m" / "data")
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--ann-min-rows", type=int, default=0, help="CTXSTORE_VECTOR_ANN_MIN_ROWS (0: shortlist)")
    ap.add_argument("--reference", type=Path, help="the 100k data dir, measured in the same run")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    progress = json.loads((args.source.parent / "progress.json").read_text())
    res: dict[str, Any] = {"diagnostic": "index written directly beyond the API-ingested 100k; queries over HTTP"}
    grown = args.work.parent / "grown.json"  # how the work dir was built, for later runs on it
    if not args.work.exists():
        shutil.copytree(args.source, args.work, ignore=shutil.ignore_patterns("serve.lock"))
        grown.write_text(json.dumps(_grow(args.work, args.chunks)))
    if "records_written" not in json.loads(grown.read_text()):
        grown.write_text(json.dumps({**json.loads(grown.read_text()), **_add_records(args.work)}))
    res.update(json.loads(grown.read_text()))
    mixed = args.work.parent / "mixed.json"  # mix_1m.py gave the written rows real-shaped vectors
    if mixed.exists():
        res["vectors_mixed"] = json.loads(mixed.read_text())
    claims = list(SciFact.load().held_out.values()) + list(SciFact.load().queries.values())
    random.Random(23).shuffle(claims)
    env = {"CTXSTORE_EXTRACTOR": "none"}
    if args.ann_min_rows:
        env["CTXSTORE_VECTOR_ANN_MIN_ROWS"] = str(args.ann_min_rows)
        res["ann_min_rows"] = args.ann_min_rows
        if not list((args.work / "search.db.ann").glob(f"*.{FORMAT}{SUFFIX}")):
            res["ann_build"] = _build_ann(args.work, env, progress["key"])
    if args.reference is not None:
        with Api(args.reference, env=env, key=progress["key"]) as api:
            api.query({"database": "lat", "query": "load the scope", "mode": "fast", "max_results": 10})
            res["reference_100k"] = _measure(api, list(claims), 100_000, n_fast=args.queries)
    with Api(args.work, env=env, key=progress["key"]) as api:
        t0 = time.perf_counter()
        api.query({"database": "lat", "query": "load the scope", "mode": "fast", "max_results": 10})
        res["first_query_s"] = round(time.perf_counter() - t0, 1)  # loads the scope's vectors into memory
        res.update(_measure(api, list(claims), args.chunks, n_fast=args.queries))
    if "reference_100k" in res:
        ref = res["reference_100k"]
        res["ratio_to_reference_p50_p95"] = {
            mode: [round(res[mode][p] / ref[mode][p], 2) for p in ("p50_ms", "p95_ms")] for mode in ("fast", "thinking")
        }
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res), flush=True)


def _build_ann(work: Path, env: dict[str, str], key: str, timeout_s: float = 3600) -> dict[str, Any]:
    """Start a server, let its first query start the scope's HNSW build, wait for the saved file, stop cleanly."""
    out: dict[str, Any] = {"load_start": load()}
    with Api(work, env=env, key=key) as api:
        t0 = time.perf_counter()
        api.query({"database": "lat", "query": "load the scope", "mode": "fast", "max_results": 10})
        out["first_query_s"] = round(time.perf_counter() - t0, 1)
        while not list((work / "search.db.ann").glob(f"*.{FORMAT}{SUFFIX}")):
            if time.perf_counter() - t0 > timeout_s:
                raise SystemExit("the HNSW index was not saved in time")
            time.sleep(5)
        out["built_s"] = round(time.perf_counter() - t0, 1)  # first query, then the build (one thread) and save
        out["rss_mb"] = _rss_mb(api.server.proc.pid)
    out["load_end"] = load()
    print(f"HNSW built: {out}", flush=True)
    return out


if __name__ == "__main__":
    main()
