"""Diagnostic (in-process, no server): the vector lane's HNSW index at 1M rows on real-shaped vectors.

    nice -n 19 uv run python -m bench.retrieval.ann_1m prepare --sizes real 1000000 --configs i8-16-128
    flock /work/wt/bench.lock uv run python -m bench.retrieval.ann_1m measure --sizes real 1000000 --configs ...

`prepare` (outside the benchmark lock, lowest priority, one thread: the machine is shared) embeds and caches
the vectors, the exact ground truth, and builds each index once; `measure` times the searches.

Why another corpus than ann_choice.py's: that one grows 5,183 SciFact vectors to 1M by adding isotropic noise
(~193 noisy copies of each, cosine ~0.5 between copies), a shape no embedded text has and one HNSW finds hard
(recall@100 0.38-0.51). Embedding 1M real texts here would take ~5 h (the embedder does ~50 texts/s on this
machine), so the corpus is built from real vectors and grown from them, labelled so:

- real part: every vector of the 100k-chunk corpus ingested through the API (/work/benchdata/r100k: the 5,183
  SciFact abstracts and ~95k notes of three SciFact sentences, embedded by the real model) plus the 5,882 LoCoMo
  turns ("Speaker: text", embedded here and cached in bench/.cache);
- grown part (up to each size): normalised mixtures of 2-3 real vectors from different items, Dirichlet weights,
  small noise (norm ~0.1), so each new row sits between real texts the way a note on several topics does.

Queries: unseen SciFact claims and LoCoMo questions (2:1), embedded by the model. Ground truth: the exact top 100
by dot product. Each configuration (dtype-connectivity-expansion_add) is built once (build
time labelled with the load it ran under) and saved under ~/.cache/ctxstore-ann/mix; its search is swept
over the breadth (expansion_search) and the number of candidates rescored exactly in float32 (the lane
asks 2 x limit + 8 = 208 at limit 100), one thread, with recall@100, p50/p95, build time and memory per
vector, and the filtered case (one collection in 10, the lane's over-fetch). The current lane (1-bit
shortlist + exact rescoring) and the exact scan are measured in the same run: compare ratios, the machine is
shared. Writes bench/results/ann_1m.json (merged per size).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.ann_index import Index, codes  # loads onnxruntime before usearch (see ann_index.py)

from bench.retrieval.ann_choice import K, exact_top, recall, timed  # isort: skip
from bench.retrieval.baselines import CACHE, load_jsonl  # isort: skip
from bench.retrieval.run import LOCOMO, REPO, SCIFACT  # isort: skip
from ctxstore.adapters.models.local_embedder import LocalEmbedder  # isort: skip
from ctxstore.adapters.local.vector_cache import VectorScope, nearest  # isort: skip

RESULTS = REPO / "bench" / "results" / "ann_1m.json"
INDEXES = Path.home() / ".cache" / "ctxstore-ann" / "mix"
R100K = Path("/work/benchdata/r100k/data/search.db")
FETCHES = (208, 320)
BREADTHS = (128, 192, 256, 384, 512, 768)
TARGET = 0.98
Vectors = npt.NDArray[np.float32]


def _embed_cached(name: str, texts: list[str], query: bool) -> Vectors:
    path = CACHE / f"{name}.npy"
    if path.exists():
        cached: Vectors = np.load(path)
        if len(cached) == len(texts):
            return cached
    embedder = LocalEmbedder()
    if query:
        out = np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)
    else:
        out = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def locomo_texts() -> tuple[list[str], list[str]]:
    """LoCoMo turns ("Speaker: text") and its questions of categories 1-4."""
    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
    turns, questions = [], []
    for s in samples:
        for key, value in s["conversation"].items():
            if re.fullmatch(r"session_\d+", key):
                turns += [f"{t['speaker']}: {t['text']}" for t in value]
        questions += [str(qa["question"]) for qa in s["qa"] if qa.get("category") in (1, 2, 3, 4)]
    return turns, questions


def real_vectors() -> Vectors:
    conn = sqlite3.connect(f"file:{R100K}?mode=ro", uri=True)
    blobs = [b for (b,) in conn.execute("SELECT vector FROM chunks WHERE vector IS NOT NULL ORDER BY id")]
    conn.close()
    api = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
    turns, _ = locomo_texts()
    return np.concatenate([api, _embed_cached("locomo-turns-plain", turns, query=False)]).astype(np.float32)


def queries(n: int) -> Vectors:
    claims = [q["text"] for q in load_jsonl(SCIFACT / "queries.jsonl")]
    _, questions = locomo_texts()
    random.Random(3).shuffle(claims)
    random.Random(4).shuffle(questions)
    c = _embed_cached("ann1m-claims", claims[:400], query=True)
    q = _embed_cached("ann1m-locomo-questions", questions[:200], query=True)
    return np.concatenate([c[: n - n // 3], q[: n // 3]])


def grow_mix(real: Vectors, size: int, seed: int = 5) -> Vectors:
    """Real rows first, then normalised mixtures of 2-3 distinct real rows with small noise."""
    rng = np.random.default_rng(seed)
    out = np.empty((size, real.shape[1]), dtype=np.float32)
    have = min(size, len(real))
    out[:have] = real[:have]
    dim = real.shape[1]
    for start in range(have, size, 50_000):
        n = min(50_000, size - start)
        parts = rng.integers(0, len(real), (n, 3))
        weights = rng.dirichlet((1.0, 1.0, 1.0), n).astype(np.float32)
        weights[rng.random(n) < 0.5, 2] = 0.0  # half mix two texts, half three
        v = np.einsum("nk,nkd->nd", weights, real[parts]) + rng.normal(0, 0.1 / np.sqrt(dim), (n, dim))
        out[start : start + n] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


class OwnCodes:
    """A `q8` configuration: int8 codes of our own (ann_index.codes), the query coded the same way."""

    def __init__(self, index: Any) -> None:
        self.index = index

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "index":
            object.__setattr__(self, name, value)
        else:
            setattr(self.index, name, value)

    def search(self, q: Vectors, count: int, threads: int = 1) -> Any:
        return self.index.search(codes(q), count, threads=threads)


def build(rows: Vectors, config: str, threads: int = 1) -> tuple[Any, dict[str, Any]]:
    """The saved index of this configuration, built and saved when missing. Configs are dtype-connectivity-
    expansion_add; dtype `q8` is i8 with the lane's own codes (ann_index.codes), `i8` usearch's own cast."""
    dtype, conn, exp = config.split("-")
    own = dtype == "q8"
    dtype = "i8" if own else dtype
    path = INDEXES / f"{config}-{len(rows)}.usearch"
    meta = path.with_suffix(".json")
    INDEXES.mkdir(parents=True, exist_ok=True)
    if not (path.exists() and meta.exists()):
        index = Index(ndim=rows.shape[1], metric="ip", dtype=dtype, connectivity=int(conn), expansion_add=int(exp))
        t0 = time.perf_counter()
        for s in range(0, len(rows), 65_536):
            block = rows[s : s + 65_536]
            index.add(np.arange(s, s + len(block), dtype=np.int64), codes(block) if own else block, threads=threads)
        built = {
            f"build_us_per_vector_{threads}_threads": round((time.perf_counter() - t0) / len(rows) * 1e6, 1),
            "build_load_avg": os.getloadavg(),
        }
        index.save(str(path))
        meta.write_text(json.dumps(built))
        del index
    index = Index.restore(str(path))
    info: dict[str, Any] = json.loads(meta.read_text())
    info["memory_bytes_per_vector"] = round(index.memory_usage / len(rows))
    info["file_bytes_per_vector"] = round(path.stat().st_size / len(rows))
    return (OwnCodes(index) if own else index), info


def sweep(index: Any, rows: Vectors, qs: Vectors, truth: list[npt.NDArray[np.int64]]) -> list[dict[str, Any]]:
    points = []
    for fetch in FETCHES:
        for b in BREADTHS:
            index.expansion_search = max(b, fetch)

            def search(q: Vectors, fetch: int = fetch) -> npt.NDArray[np.int64]:
                got = np.asarray(index.search(q, fetch, threads=1).keys, dtype=np.int64)
                return got[np.argsort(-(rows[got] @ q))][:K]

            found, lat = timed(search, qs)
            points.append({"fetch": fetch, "breadth": b, "recall@100": round(recall(found, truth), 4), **lat})
            print(f"    {points[-1]}", flush=True)
            if points[-1]["recall@100"] >= 0.995:
                break
    return points


def filtered(index: Any, rows: Vectors, qs: Vectors, coll: npt.NDArray[np.int64], breadth: int) -> dict[str, Any]:
    """One collection in 10, asked as the lane asks (k / share x 2 candidates), against its exact top 100."""
    allowed = np.flatnonzero(coll % 10 == 0)
    truth = exact_top(rows, qs, K, allowed)
    fetch = 2 * (2 * K + 8) * 10
    index.expansion_search = max(breadth, fetch)

    def search(q: Vectors) -> npt.NDArray[np.int64]:
        got = np.asarray(index.search(q, fetch, threads=1).keys, dtype=np.int64)
        got = got[coll[got] % 10 == 0]
        return got[np.argsort(-(rows[got] @ q))][:K]

    found, lat = timed(search, qs)
    return {"fetch": fetch, "recall@100": round(recall(found, truth), 4), **lat}


def lane(rows: Vectors, qs: Vectors, truth: list[npt.NDArray[np.int64]]) -> dict[str, Any]:
    scope = VectorScope.empty(0, rows.shape[1], capacity=len(rows))
    scope.add_block(np.arange(len(rows), dtype=np.int64), ["c"] * len(rows), rows)
    view = scope.view(approximate=True)
    found, lat = timed(lambda q: nearest(view, q, view.alive.copy(), 2 * K + 8)[0][:K], qs)
    exact = scope.view(approximate=False)
    _, exact_lat = timed(lambda q: nearest(exact, q, exact.alive.copy(), 2 * K + 8)[0], qs[:30])
    return {"shortlist_lane": {"recall@100": round(recall(found, truth), 4), **lat}, "exact_scan": exact_lat}


def corpus(label: str, real: Vectors, qs: Vectors) -> tuple[Vectors, list[npt.NDArray[np.int64]]]:
    """The rows of one size and the exact top 100 of each query (cached: minutes at 1M)."""
    rows = real if label == "real" else grow_mix(real, int(label))
    path = CACHE / f"ann1m-truth-{label}-{len(qs)}.npy"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        np.save(path, np.stack(exact_top(rows, qs, K)))
    return rows, list(np.load(path))


def run_size(label: str, real: Vectors, qs: Vectors, configs: list[str]) -> dict[str, Any]:
    rows, truth = corpus(label, real, qs)
    coll = np.random.default_rng(11).integers(0, 1000, len(rows)).astype(np.int64)
    out: dict[str, Any] = {
        "rows": len(rows),
        "real_rows": min(len(rows), len(real)),
        "queries": len(qs),
        "load_avg_start": os.getloadavg(),
    }
    out.update(lane(rows, qs, truth))
    print(f"{label}: lane {out['shortlist_lane']} exact {out['exact_scan']}", flush=True)
    for config in configs:
        index, info = build(rows, config)
        print(f"{label}: {config} {info}", flush=True)
        info["sweep"] = sweep(index, rows, qs, truth)
        at = [p for p in info["sweep"] if p["recall@100"] >= TARGET]
        info["at_target"] = min(at, key=lambda p: p["p50_ms"]) if at else None
        breadth = (info["at_target"] or info["sweep"][-1])["breadth"]
        info["filtered_1_of_10"] = filtered(index, rows, qs, coll, breadth)
        info["load_avg"] = os.getloadavg()
        out[config] = info
        print(f"{label}: {config} at target {info['at_target']} filtered {info['filtered_1_of_10']}", flush=True)
        del index
    out["load_avg_end"] = os.getloadavg()
    return out


def feedback(label: str, real: Vectors, qs: Vectors, config: str) -> dict[str, Any]:
    """The feedback search's recall by breadth: the query moved toward its two best rows (retrieval/feedback.py,
    beta 0.5; the exact vector top 2 stands in for the fused top 2), against the moved vector's exact top 100.

    A moved vector lies among the rows rather than where questions lie, where HNSW finds neighbours at a smaller
    breadth; the query service may then search it more narrowly than a first pass."""
    from ctxstore.retrieval.feedback import FEEDBACK_BETA, FEEDBACK_DOCS

    rows, truth = corpus(label, real, qs)
    moved = qs + FEEDBACK_BETA * np.stack([rows[t[:FEEDBACK_DOCS]].mean(axis=0) for t in truth])
    moved = (moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32)
    path = CACHE / f"ann1m-truth-feedback-{label}-{len(qs)}.npy"
    if not path.exists():
        np.save(path, np.stack(exact_top(rows, moved, K)))
    moved_truth = list(np.load(path))
    index, _ = build(rows, config)
    out: dict[str, Any] = {"config": config, "load_avg_start": os.getloadavg(), "points": []}
    for name, vectors, want in (("first_pass", qs, truth), ("feedback", moved, moved_truth)):
        for b in BREADTHS:
            index.expansion_search = max(b, 2 * K + 8)

            def search(q: Vectors) -> npt.NDArray[np.int64]:
                got = np.asarray(index.search(q, 2 * K + 8, threads=1).keys, dtype=np.int64)
                return got[np.argsort(-(rows[got] @ q))][:K]

            found, lat = timed(search, vectors)
            out["points"].append({"search": name, "breadth": b, "recall@100": round(recall(found, want), 4), **lat})
            print(f"    {out['points'][-1]}", flush=True)
    out["load_avg_end"] = os.getloadavg()
    return out


_CHILD_STATUS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def _status_mb() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name = line.split(":")[0]
        if name in _CHILD_STATUS:
            out[name] = round(int(line.split()[1]) / 1024, 1)
    return out


def memory_child(label: str, lane_name: str, config: str, n_queries: int) -> None:
    """One process: the scope as a restart finds it (matrix memory-mapped from a .npy, as vector snapshots are),
    the lane's index loaded (HNSW file) or its codes computed (shortlist), then the queries; prints RSS."""
    from ctxstore.adapters.local.ann_index import AnnIndex

    qs = queries(n_queries)
    truth = list(np.load(CACHE / f"ann1m-truth-{label}-{len(qs)}.npy"))
    mat = np.asarray(np.load(INDEXES / f"rows-{label}.npy", mmap_mode="r"))
    n, dim = mat.shape
    out: dict[str, Any] = {"lane": lane_name, "start_mb": _status_mb()}
    scope = VectorScope(
        generation=0,
        dim=dim,
        mat=mat,
        ids=np.arange(n, dtype=np.int64),
        coll=np.zeros(n, dtype=np.int32),
        alive=np.ones(n, dtype=np.bool_),
        n=n,
        coll_codes={"c": 0},
    )
    t0 = time.perf_counter()
    if lane_name == "hnsw":
        ann = AnnIndex.load(INDEXES / f"{config}-{n}.usearch", dim)
        assert ann is not None
        scope.install_ann(ann)
    view = scope.view(approximate=lane_name == "shortlist")
    out["ready_s"] = round(time.perf_counter() - t0, 2)
    out["ready_mb"] = _status_mb()
    found, lat = timed(lambda q: nearest(view, q, view.alive.copy(), 2 * K + 8)[0][:K], qs)
    out.update({"recall@100": round(recall(found, truth), 4), **lat, "after_queries_mb": _status_mb()})
    print(json.dumps(out), flush=True)


def memory(label: str, config: str, n_queries: int) -> dict[str, Any]:
    """Resident memory and latency of the lane in a fresh process each, HNSW against the shortlist."""
    import subprocess
    import sys

    out: dict[str, Any] = {"load_avg_start": os.getloadavg()}
    n = np.load(INDEXES / f"rows-{label}.npy", mmap_mode="r").shape[0]
    built = (INDEXES / f"{config}-{n}.usearch").exists()
    for lane_name in ("hnsw", "shortlist") if built else ("shortlist",):
        args = [sys.executable, "-m", "bench.retrieval.ann_1m", "memory-child", "--sizes", label]
        args += ["--configs", config, "--lane", lane_name, "--queries", str(n_queries)]
        done = subprocess.run(args, capture_output=True, text=True, cwd=REPO, check=False)
        if done.returncode != 0:
            out[lane_name] = {"error": done.stderr[-500:]}
        else:
            out[lane_name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{label}: memory {lane_name} {out[lane_name]}", flush=True)
    out["load_avg_end"] = os.getloadavg()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["prepare", "measure", "memory", "memory-child", "feedback"])
    ap.add_argument("--lane", default="hnsw")
    ap.add_argument("--sizes", nargs="+", default=["real"])
    ap.add_argument("--configs", nargs="*", default=["i8-16-128"])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1, help="build threads (prepare)")
    args = ap.parse_args()
    if args.step == "memory-child":
        memory_child(args.sizes[0], args.lane, args.configs[0], args.queries)
        return
    real = real_vectors()
    qs = queries(args.queries)
    if args.step == "prepare":
        for label in args.sizes:
            rows, _ = corpus(label, real, qs)
            if not (INDEXES / f"rows-{label}.npy").exists():  # what `memory` maps, as a snapshot is mapped
                np.save(INDEXES / f"rows-{label}.npy", rows)
            for config in args.configs:
                print(f"{label}: {config} {build(rows, config, args.threads)[1]}", flush=True)
        return
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if args.step == "feedback":
        for label in args.sizes:
            results.setdefault(label, {})[f"feedback_{args.configs[0]}"] = feedback(label, real, qs, args.configs[0])
            RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        return
    if args.step == "memory":
        for label in args.sizes:
            results.setdefault(label, {})[f"memory_{args.configs[0]}"] = memory(label, args.configs[0], args.queries)
            RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        return
    results["diagnostic"] = "in-process; real vectors grown by mixtures to each size; see the module docstring"
    for label in args.sizes:
        prev = results.get(label, {})
        results[label] = {**prev, **run_size(label, real, qs, args.configs)}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
