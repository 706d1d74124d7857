"""Diagnostic (in-process, no server): which ANN library should carry the vector lane's large scopes.

    uv run python -m bench.retrieval.ann_choice [--sizes 100000 1000000] [--queries 300]

Vectors: the 5,183 real SciFact document vectors (embedded by the real model, cached as vector_recall.py
does), grown to each size the way latency_1m.py grows its corpus (a random real vector plus Gaussian noise,
sigma 1/sqrt(dim) per component, normalised); queries: SciFact claims embedded by the model. Ground truth:
the exact top 100 by dot product. For each candidate: build time per vector (both cores), in-memory bytes
per vector, index file size, save / load time (what a restart pays), recall@100 and p50/p95 per query on
one thread over a sweep of the search breadth, the latency at the first breadth reaching recall >= 0.98,
deletes (remove by key, then search), and filtered search for one collection among 10 and among 100. The
current lane (vector_cache.nearest: 1-bit shortlist + exact rescoring) is measured in the same run: the
machine is shared, so compare ratios, not absolute times. Writes bench/results/ann_choice.json (merged per
size) and prints a table. At 1M, built indexes are saved under ~/.cache/ctxstore-ann and reused.

Choice: usearch, HNSW with i8 codes, its candidates rescored exactly in float32 (as the lane does).
At 100k rows, in one run (load 8-10 on 2 cores, so read the ratios): the current lane recall@100 0.988 at
p50/p95 7.7/12.7 ms; usearch i8 0.990 at 1.7/17.4 ms (breadth 384; 0.980 at 1.3 ms at 256), ratio 0.22;
faiss HNSW (flat) 0.983 at 2.3/7.9 ms, ratio 0.29. Build 1.4 ms (usearch i8) vs 1.2 ms (faiss) a vector
on both cores. Memory: usearch i8 640 B a vector resident (533 on disk) against faiss HNSW's 1,680 (it
keeps its own float32 copy, which the lane already holds). Restart: 0.25 s to load 100k (0.03 s mmap view)
vs 0.31 s. Deletes decide it: usearch removes by key (0.5-0.9 us a key, no deleted row returned), while
faiss refuses remove_ids on HNSW ("not implemented for this type of index"), so every re-ingest would
leave a dead node to hide with a selector until a full rebuild. Filtered search: usearch's Python API has
no predicate (over-fetch and drop: one collection in ten, 0.991 at 13 ms) and faiss's IDSelector does as
well there (0.979 at 12.8 ms) but collapses on narrow filters (one in a hundred: 0.31 at breadth 384);
for those both lose to scanning the collection's rows (1,000 rows: 0.1 ms), which the lane does. faiss
IVF-PQ (48 x 8-bit, nlist 1024, 400 rescored) stops near recall 0.956, below the target. usearch f32/f16
reach the target at 7.6/6.2 ms (earlier run) for 3x/1.6x the memory of i8. One hazard, found here:
usearch's extension loaded before onnxruntime makes onnxruntime's import crash (SIGSEGV), so
adapters/local/ann_index.py loads onnxruntime first.

At 1M rows the choice does not hold: usearch (connectivity 16, expansion_add 128) reached recall@100 only
0.38 at breadth 100 rising to 0.51 at 1024 (3.9 ms; i8 and f16 alike, so not the codes: the graph), where
the current lane kept 0.998 at p50 111-289 ms. The grown corpus holds ~193 noisy copies of each SciFact
vector, a hard shape for HNSW. So the index is off by default in the lane (SqliteSearchIndex(ann_min_rows=
...) enables it); next to try: connectivity 32-48 / expansion_add 256+ at 1M, faiss HNSW at 1M, and the
recall on a real 1M corpus. 1M build: 555 us (i8) / 941 us (f16) a vector on both cores; restart load
0.65 s (i8, 0.13 s mmap) / 2.3 s (f16).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt
from bench.retrieval.baselines import CACHE, embed_corpus, load_jsonl
from bench.retrieval.run import REPO, SCIFACT
from usearch.index import Index

from ctxstore.adapters.local.vector_cache import VectorScope, nearest
from ctxstore.adapters.models.local_embedder import LocalEmbedder

RESULTS = REPO / "bench" / "results" / "ann_choice.json"
INDEXES = Path.home() / ".cache" / "ctxstore-ann"
K = 100
FETCH = 2 * K + 8  # what vector_search asks the lane for at limit 100
TARGET = 0.98
BREADTHS = (100, 128, 192, 256, 384, 512, 768, 1024)  # both libraries search at least k wide
Vectors = npt.NDArray[np.float32]
Keys = npt.NDArray[np.int64]

# A restart in a fresh process: load time and resident memory the loaded index adds (page cache warm).
_CHILD = """
import json, os, sys, time
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
lib, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if lib == 'usearch':
    from usearch.index import Index
    load, view = (lambda: Index.restore(path)), (lambda: Index.restore(path, view=True))
else:
    import faiss
    load, view = (lambda: faiss.read_index(path)), (lambda: faiss.read_index(path, faiss.IO_FLAG_MMAP))
before = rss(); t0 = time.perf_counter(); idx = load()
out = {'load_s': round(time.perf_counter() - t0, 3), 'rss_bytes_per_vector': round((rss() - before) / n)}
del idx
try:
    t0 = time.perf_counter(); v = view(); out['mmap_load_s'] = round(time.perf_counter() - t0, 3)
except Exception as e:
    out['mmap_load'] = str(e).splitlines()[0][:120]
print(json.dumps(out))
"""


def restart(lib: str, path: Path, n: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _CHILD, lib, str(path), str(n)], capture_output=True, text=True)
    if done.returncode != 0:
        return {"restart_error": done.stderr[-300:]}
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def load_vectors(n_queries: int) -> tuple[Vectors, Vectors]:
    embedder = LocalEmbedder()
    base, _ = embed_corpus(embedder, load_jsonl(SCIFACT / "corpus.jsonl"), use_cache=True)
    qfile = CACHE / f"scifact-claims-{embedder.model_id.replace('/', '__')}.npy"
    if not qfile.exists():
        texts = [q["text"] for q in load_jsonl(SCIFACT / "queries.jsonl")]
        random.Random(3).shuffle(texts)
        np.save(qfile, np.stack([embedder.embed_query(t) for t in texts[:1000]]))
    return base.astype(np.float32), np.load(qfile)[:n_queries].astype(np.float32)


def grow(base: Vectors, size: int, seed: int = 3) -> Vectors:
    rng = np.random.default_rng(seed)
    out = np.empty((size, base.shape[1]), dtype=np.float32)
    have = min(size, len(base))
    out[:have] = base[:have]
    for start in range(have, size, 100_000):
        n = min(100_000, size - start)
        v = base[rng.integers(0, len(base), n)] + rng.normal(0, 1 / np.sqrt(base.shape[1]), (n, base.shape[1]))
        out[start : start + n] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def exact_top(rows: Vectors, queries: Vectors, k: int, allowed: Keys | None = None) -> list[Keys]:
    """The exact top k per query (positions = keys), optionally among `allowed` positions only."""
    sub = rows if allowed is None else rows[allowed]
    out = []
    for start in range(0, len(queries), 32):
        scores = queries[start : start + 32] @ sub.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        for i, t in enumerate(top):
            best = t[np.argsort(-scores[i, t])]
            out.append(best if allowed is None else allowed[best])
    return out


def recall(found: list[Keys], truth: list[Keys], k: int = K) -> float:
    return statistics.fmean(
        len(set(f[:k].tolist()) & set(t[:k].tolist())) / k for f, t in zip(found, truth, strict=True)
    )


def timed(search: Callable[[Vectors], Keys], queries: Vectors) -> tuple[list[Keys], dict[str, float]]:
    found, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        found.append(search(q))
        times.append(time.perf_counter() - t0)
    ms = np.asarray(times) * 1000
    return found, {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3)}


def sweep(search: Callable[[Vectors, int], Keys], queries: Vectors, truth: list[Keys]) -> dict[str, Any]:
    points = []
    for b in BREADTHS:
        found, lat = timed(lambda q, b=b: search(q, b), queries)
        points.append({"breadth": b, "recall@100": round(recall(found, truth), 4), **lat})
        if points[-1]["recall@100"] >= 0.995:
            break
    at = next((p for p in points if p["recall@100"] >= TARGET), None)
    return {"sweep": points, "at_target": at}


# -- the current lane ------------------------------------------------------------------------------


def current_lane(rows: Vectors, queries: Vectors, truth: list[Keys], coll: Keys) -> dict[str, Any]:
    scope = VectorScope.empty(0, rows.shape[1], capacity=len(rows))
    scope.add_block(np.arange(len(rows), dtype=np.int64), [str(c) for c in coll.tolist()], rows)
    view = scope.view(approximate=True)
    found, lat = timed(lambda q: nearest(view, q, view.alive.copy(), K)[0], queries)
    exact_view = scope.view(approximate=False)
    _, exact_lat = timed(lambda q: nearest(exact_view, q, exact_view.alive.copy(), K)[0], queries[:50])
    return {"recall@100": round(recall(found, truth), 4), **lat, "exact_scan": exact_lat}


# -- usearch ---------------------------------------------------------------------------------------


def exact_among(rows: Vectors, allowed: Keys, q: Vectors) -> Keys:
    """What the lane does for a small filtered set: gather the allowed rows, score them all."""
    scores = rows[allowed] @ q
    top = np.argpartition(-scores, K - 1)[:K]
    return allowed[top[np.argsort(-scores[top])]]


def filtered(
    rows: Vectors,
    queries: Vectors,
    coll: Keys,
    search: Callable[[Vectors, Keys, int, int], Keys],
    how: str,
    max_effort: Callable[[int], int] = lambda colls: 16,
) -> dict[str, Any]:
    """One collection among 10 and among 100: the library's way at growing effort, and the exact scan."""
    out: dict[str, Any] = {}
    for colls in (10, 100):
        allowed = np.flatnonzero(coll % colls == 0)
        truth = exact_top(rows, queries[:100], K, allowed)
        points = []
        for effort in (e for e in (1, 4, 16) if e <= max_effort(colls)):
            found, lat = timed(lambda q, e=effort, c=colls, a=allowed: search(q, a, c, e), queries[:100])
            points.append({"effort": effort, "recall@100": round(recall(found, truth), 4), **lat})
            if points[-1]["recall@100"] >= TARGET:
                break
        _, exact_lat = timed(lambda q, a=allowed: exact_among(rows, a, q), queries[:50])
        out[f"1 of {colls}"] = {"how": how, "sweep": points, "exact_scan_of_the_collection": exact_lat}
    return out


def deleted_after_remove(
    remove: Callable[[Keys], None], search: Callable[[Vectors], Keys], queries: Vectors, truth: list[Keys], n: int
) -> dict[str, Any]:
    """Remove 1% of the keys (the ones most often in the truth first), then search."""
    gone = np.unique(np.concatenate([t[:10] for t in truth]))[: max(1, n // 100)]
    t0 = time.perf_counter()
    remove(gone)
    res: dict[str, Any] = {"delete_us_per_key": round((time.perf_counter() - t0) / len(gone) * 1e6, 2)}
    found, _ = timed(search, queries)
    res["deleted_returned"] = int(sum(np.isin(f, gone).sum() for f in found))
    return res


# -- usearch ---------------------------------------------------------------------------------------


def usearch_candidate(
    dtype: str, rows: Vectors, queries: Vectors, truth: list[Keys], coll: Keys, work: Path
) -> dict[str, Any]:
    n = len(rows)
    path = work / f"usearch-{dtype}-{n}.usearch"
    res: dict[str, Any] = {"library": "usearch", "config": f"HNSW {dtype}, connectivity 16, expansion_add 128"}
    if dtype != "f32":
        res["config"] += f", {FETCH} candidates rescored exactly in float32"
    meta = path.with_suffix(".json")
    if not (path.exists() and meta.exists()):
        index = Index(ndim=rows.shape[1], metric="ip", dtype=dtype, connectivity=16, expansion_add=128)
        t0 = time.perf_counter()
        index.add(np.arange(n, dtype=np.int64), rows, threads=2)
        build_us = round((time.perf_counter() - t0) / n * 1e6, 1)
        t0 = time.perf_counter()
        index.save(str(path))
        meta.write_text(json.dumps({"build_us": build_us, "save_s": round(time.perf_counter() - t0, 3)}))
        del index
    else:
        res["build_reused"] = True
    res.update(json.loads(meta.read_text()))
    res["file_bytes_per_vector"] = round(path.stat().st_size / n)
    res.update(restart("usearch", path, n))
    index = Index.restore(str(path))
    assert index is not None
    res["memory_usage_bytes_per_vector"] = round(index.memory_usage / n)

    def search(q: Vectors, b: int) -> Keys:
        index.expansion_search = b
        if dtype == "f32":
            return np.asarray(index.search(q, K, threads=1).keys, dtype=np.int64)
        # Quantised distances misorder close rows (i8 alone stops near recall 0.95): fetch what the lane
        # asks for (2 x limit + 8) and rescore exactly from float32, as the lane does.
        got = np.asarray(index.search(q, FETCH, threads=1).keys, dtype=np.int64)
        return got[np.argsort(-(rows[got] @ q))][:K]

    res.update(sweep(search, queries, truth))
    breadth = (res["at_target"] or res["sweep"][-1])["breadth"]
    index.expansion_search = breadth

    # usearch's Python API (2.26.6) has no filter predicate (Index.search takes none; the C++
    # filtered_search is not bound): over-fetch (effort x the collection's share) and drop other rows.
    def fsearch(q: Vectors, allowed: Keys, colls: int, effort: int) -> Keys:
        got = np.asarray(index.search(q, FETCH * colls * effort, threads=1).keys, dtype=np.int64)
        got = got[coll[got] % colls == 0]
        return got[np.argsort(-(rows[got] @ q))][:K]

    res["filtered"] = filtered(
        rows,
        queries,
        coll,
        fsearch,
        "over-fetch k x share x effort, drop other collections",
        max_effort=lambda colls: max(1, 60_000 // (FETCH * colls)),  # past that, scanning the collection wins
    )
    res.update(deleted_after_remove(lambda g: index.remove(g), lambda q: search(q, breadth), queries, truth, n))
    res["deletes"] = "remove(keys) marks nodes deleted; search skips them; the graph keeps them until compaction"
    res["breadth"] = breadth
    return res


# -- faiss -----------------------------------------------------------------------------------------


def faiss_candidate(
    kind: str, rows: Vectors, queries: Vectors, truth: list[Keys], coll: Keys, work: Path
) -> dict[str, Any]:
    n, d = rows.shape
    path = work / f"faiss-{kind}-{n}.faiss"
    meta = path.with_suffix(".json")
    nlist = 1024 if n <= 200_000 else 4096
    res: dict[str, Any] = {"library": "faiss-cpu"}
    res["config"] = (
        "IndexHNSWFlat M 16, efConstruction 128, inner product"
        if kind == "hnsw"
        else f"IndexIVFPQ nlist {nlist}, 48x8-bit codes, exact float32 rescoring of 4k"
    )
    faiss.omp_set_num_threads(2)
    if not (path.exists() and meta.exists()):
        t0 = time.perf_counter()
        if kind == "hnsw":
            index = faiss.IndexHNSWFlat(d, 16, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 128
        else:
            index = faiss.IndexIVFPQ(faiss.IndexFlatIP(d), d, nlist, 48, 8, faiss.METRIC_INNER_PRODUCT)
            index.train(rows[np.random.default_rng(0).choice(n, min(n, 64 * nlist), replace=False)])
        index.add(rows)
        build_us = round((time.perf_counter() - t0) / n * 1e6, 1)
        t0 = time.perf_counter()
        faiss.write_index(index, str(path))
        meta.write_text(json.dumps({"build_us": build_us, "save_s": round(time.perf_counter() - t0, 3)}))
        del index
    else:
        res["build_reused"] = True
    res.update(json.loads(meta.read_text()))
    res["file_bytes_per_vector"] = round(path.stat().st_size / n)
    res.update(restart("faiss", path, n))
    index = faiss.read_index(str(path))
    faiss.omp_set_num_threads(1)

    def raw(q: Vectors, b: int, fetch: int, sel: Any = None) -> Keys:
        if kind == "hnsw":
            params: Any = faiss.SearchParametersHNSW(efSearch=max(b, fetch))
        else:
            params = faiss.SearchParametersIVF(nprobe=max(1, b // 8))
        if sel is not None:
            params.sel = sel
        _, ids = index.search(q.reshape(1, -1), fetch, params=params)
        return np.asarray(ids[0][ids[0] >= 0], dtype=np.int64)

    def search(q: Vectors, b: int, sel: Any = None) -> Keys:
        if kind == "hnsw":
            return raw(q, b, K, sel)
        short = raw(q, b, 4 * K, sel)  # a shortlist by PQ distances, rescored exactly as the lane does
        return short[np.argsort(-(rows[short] @ q))][:K]

    res.update(sweep(lambda q, b: search(q, b), queries, truth))
    breadth = (res["at_target"] or res["sweep"][-1])["breadth"]
    selectors: dict[int, tuple[Any, Any]] = {}

    def fsearch(q: Vectors, allowed: Keys, colls: int, effort: int) -> Keys:
        if colls not in selectors:
            bitmap = np.packbits(coll % colls == 0, bitorder="little")
            selectors[colls] = (bitmap, faiss.IDSelectorBitmap(n, faiss.swig_ptr(bitmap)))
        return search(q, breadth * effort, selectors[colls][1])

    res["filtered"] = filtered(
        rows, queries, coll, fsearch, "IDSelectorBitmap in the search parameters, breadth x effort"
    )
    try:
        res.update(
            deleted_after_remove(
                lambda g: index.remove_ids(faiss.IDSelectorBatch(g)), lambda q: search(q, breadth), queries, truth, n
            )
        )
        res["deletes"] = "remove_ids rewrites the inverted lists"
    except RuntimeError as e:
        res["deletes"] = (
            f"remove_ids refused ({str(e).splitlines()[0][-60:]}): only an alive-bitmap selector hides rows"
        )
    res["breadth"] = breadth
    return res


def run_size(size: int, base: Vectors, queries: Vectors, candidates: list[str]) -> dict[str, Any]:
    work = INDEXES if size >= 500_000 else INDEXES / "small"
    work.mkdir(parents=True, exist_ok=True)
    rows = grow(base, size)
    coll = np.random.default_rng(11).integers(0, 1000, size).astype(np.int64)
    t0 = time.perf_counter()
    truth = exact_top(rows, queries, K)
    out: dict[str, Any] = {"rows": size, "queries": len(queries), "exact_truth_s": round(time.perf_counter() - t0, 1)}
    out["load_avg_start"] = os.getloadavg()
    out["current_lane"] = current_lane(rows, queries, truth, coll)
    print(f"{size}: current lane {out['current_lane']}", flush=True)
    for name in candidates:
        if name.startswith("usearch-"):
            r = usearch_candidate(name.split("-", 1)[1], rows, queries, truth, coll, work)
        else:
            r = faiss_candidate(name.split("-", 1)[1], rows, queries, truth, coll, work)
        r["load_avg"] = os.getloadavg()
        r["lane_same_run"] = {key: out["current_lane"][key] for key in ("recall@100", "p50_ms", "p95_ms")}
        out[name] = r
        print(f"{size}: {name} {json.dumps(r)}", flush=True)
        gc.collect()
    out["load_avg_end"] = os.getloadavg()
    return out


def _best_filtered(f: dict[str, Any]) -> str:
    p = next((p for p in f["sweep"] if p["recall@100"] >= TARGET), f["sweep"][-1])
    return f"{p['recall@100']} @ {p['p50_ms']} ms (x{p['effort']}; exact {f['exact_scan_of_the_collection']['p50_ms']})"


def table(results: dict[str, Any]) -> None:
    print(
        "| rows | candidate | build µs/vec | RAM B/vec | file B/vec | restart load s | breadth | recall@100"
        " | p50 / p95 ms | p50 vs lane | 1 of 10 | 1 of 100 | deleted rows returned |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size, res in results.items():
        lane = res["current_lane"]
        print(
            f"| {size} | current lane | | | | | | {lane['recall@100']} | {lane['p50_ms']} / {lane['p95_ms']}"
            " | 1 | | | |"
        )
        for name, r in res.items():
            if not isinstance(r, dict) or "library" not in r:
                continue
            at = r["at_target"] or r["sweep"][-1]
            cells = [
                size,
                name,
                r["build_us"],
                r.get("rss_bytes_per_vector"),
                r["file_bytes_per_vector"],
                r.get("load_s"),
                at["breadth"],
                at["recall@100"],
                f"{at['p50_ms']} / {at['p95_ms']}",
                round(at["p50_ms"] / r.get("lane_same_run", lane)["p50_ms"], 3),
                _best_filtered(r["filtered"]["1 of 10"]),
                _best_filtered(r["filtered"]["1 of 100"]),
                r.get("deleted_returned", r["deletes"][:30]),
            ]
            print("| " + " | ".join(str(c) for c in cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument(
        "--candidates", nargs="+", default=["usearch-f32", "usearch-i8", "usearch-f16", "faiss-hnsw", "faiss-ivfpq"]
    )
    args = ap.parse_args()
    base, queries = load_vectors(args.queries)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.setdefault("diagnostic", "in-process; vectors grown from real SciFact vectors; see the module docstring")
    for size in args.sizes:
        # Candidates measured in an earlier run stay, each with the lane's figures of its own run.
        results[str(size)] = {**results.get(str(size), {}), **run_size(size, base, queries, args.candidates)}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    table({k: v for k, v in results.items() if k.isdigit()})
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
