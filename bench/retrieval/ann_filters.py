"""Diagnostic (in process, no server): the HNSW lane under a collection filter at 1M rows, through the lane's
own code (`vector_cache.nearest` with a mask; `ann_candidates.py` decides what the index is asked for).

    flock /work/wt/bench.lock uv run python -m bench.retrieval.ann_filters [--size 1000000] [--config q8-32-256]

Rows and index: ann_1m's (real vectors grown by mixtures; run its `prepare` first), the matrix mapped from its
.npy as a snapshot is, the index loaded from its file. Each row gets one of 1,000 collections at random; a
filter allows the first 1,000 x share of them: 1.0, 0.984 (a default collection beside a few small ones),
0.5 and 0.1. For each: recall@100 of a first pass and of the feedback search (the query moved toward its two
best allowed rows, at NARROW_BREADTH) against the exact top 100 among the allowed rows, p50/p95, and the
candidates and breadth the index was asked for. `old` is the rule before 2026-11-27 (k / share x 2 candidates
at a breadth of at least that, no second request), measured in the same run. Writes bench/results/ann_filters.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

import numpy as np

from ctxstore.adapters.local import ann_candidates
from ctxstore.adapters.local.ann_index import AnnIndex

from bench.retrieval.ann_1m import INDEXES, Vectors, queries  # isort: skip
from bench.retrieval.ann_choice import K, exact_top, recall, timed  # isort: skip
from bench.retrieval.baselines import CACHE  # isort: skip
from bench.retrieval.run import REPO  # isort: skip
from ctxstore.adapters.local.vector_cache import NARROW_BREADTH, VectorScope, nearest  # isort: skip
from ctxstore.retrieval.feedback import FEEDBACK_BETA, FEEDBACK_DOCS  # isort: skip

RESULTS = REPO / "bench" / "results" / "ann_filters.json"
SHARES = (1.0, 0.984, 0.5, 0.1)
COLLECTIONS = 1_000
ASK = 2 * K + 8  # the lane's k at limit 100


def _truth(name: str, rows: Vectors, qs: Vectors, allowed: np.ndarray | None) -> list[np.ndarray]:
    path = CACHE / f"annfilters-{name}-{len(rows)}-{len(qs)}.npy"
    if not path.exists():
        np.save(path, np.stack(exact_top(rows, qs, K, allowed)))
    return list(np.load(path))


class Asked:
    """What the lane asks the index for (candidates, breadth searched at); `old` replays the former rule."""

    def __init__(self, ann: AnnIndex) -> None:
        self.ann, self.inner, self.old = ann, ann.search, False
        self.seen: list[tuple[int, int]] = []
        ann.search = self.search  # type: ignore[method-assign]

    def search(self, query: Vectors, count: int, breadth: int | None = None) -> np.ndarray:
        # The former rule searched at max(breadth, count) without widening: the same at a share of 1 (count is k),
        # and count itself below it (k / share x 2 exceeds any breadth the lane asks).
        found = self.inner(query, count, breadth if not self.old or count <= ASK else count)
        self.seen.append((count, int(self.ann._index.expansion_search)))
        return found


def _old_fetch(k: int, share: float) -> int | None:
    return k if share >= 1.0 else math.ceil(k / share * 2.0)


def measure(label: str, config: str, n_queries: int) -> dict[str, Any]:
    qs = queries(n_queries)
    rows: Vectors = np.load(INDEXES / f"rows-{label}.npy", mmap_mode="r")
    n, dim = rows.shape
    coll = np.asarray(np.random.default_rng(11).integers(0, COLLECTIONS, n), dtype=np.int32)
    scope = VectorScope(
        generation=0,
        dim=dim,
        mat=np.asarray(rows),
        ids=np.arange(n, dtype=np.int64),
        coll=coll,
        alive=np.ones(n, dtype=np.bool_),
        n=n,
        coll_codes={f"c{i}": i for i in range(COLLECTIONS)},
    )
    ann = AnnIndex.load(INDEXES / f"{config}-{n}.usearch", dim)
    assert ann is not None, "run ann_1m prepare for this size and config first"
    scope.install_ann(ann)
    asked = Asked(ann)
    view = scope.view(approximate=False)
    new_fetch, new_attempts = ann_candidates.fetch_size, ann_candidates.ATTEMPTS
    out: dict[str, Any] = {"rows": n, "config": config, "queries": len(qs), "load_avg_start": os.getloadavg()}
    for share in SHARES:
        mask = np.asarray(coll < round(COLLECTIONS * share), dtype=np.bool_)
        allowed = None if share >= 1.0 else np.flatnonzero(mask)
        truth = _truth(f"{share}", np.asarray(rows), qs, allowed)
        moved = qs + FEEDBACK_BETA * np.stack([rows[t[:FEEDBACK_DOCS]].mean(axis=0) for t in truth])
        moved = (moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32)
        moved_truth = _truth(f"{share}-moved", np.asarray(rows), moved, allowed)
        for rule in ("old", "new"):
            asked.old = rule == "old"
            ann_candidates.fetch_size = _old_fetch if asked.old else new_fetch
            ann_candidates.ATTEMPTS = 1 if asked.old else new_attempts
            for search, vectors, want, breadth in (
                ("first_pass", qs, truth, None),
                ("feedback", moved, moved_truth, NARROW_BREADTH),
            ):
                asked.seen.clear()

                def lane(q: Vectors, m: np.ndarray = mask, b: int | None = breadth) -> np.ndarray:
                    return nearest(view, q, m.copy(), ASK, breadth=b)[0][:K]

                found, lat = timed(lane, vectors)
                counts = np.asarray(asked.seen or [(0, 0)])
                point = {
                    "share": share,
                    "rule": rule,
                    "search": search,
                    "recall@100": round(recall(found, want), 4),
                    **lat,
                    "index_calls_per_query": round(len(asked.seen) / len(vectors), 3),
                    "candidates_asked_mean": round(float(counts[:, 0].mean()), 1),
                    "breadth_mean": round(float(counts[:, 1].mean()), 1),
                }
                out.setdefault("points", []).append(point)
                print(point, flush=True)
    ann_candidates.fetch_size, ann_candidates.ATTEMPTS = new_fetch, new_attempts
    out["load_avg_end"] = os.getloadavg()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1000000")
    ap.add_argument("--config", default="q8-32-256")
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["diagnostic"] = "in-process; ann_1m's rows and index; see the module docstring"
    results[args.size] = measure(args.size, args.config, args.queries)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
