"""Diagnostic (in-process, not a product figure): vector pseudo-relevance feedback settings on LoCoMo and SciFact.

    uv run python -m bench.retrieval.feedback_sweep --locomo DIR [--scifact DIR] [--variants 0:0,2:0.5,3:0.5]

DIR are stopped data dirs built through a real `ctxstore serve`: LoCoMo by `bench.retrieval.locomo_sweep
--build --pairs` (databases `turns` and `pairs`), SciFact by `--build-scifact` here (database `scifact`,
extractor off). Each variant `docs:beta` sets retrieval/feedback.py's FEEDBACK_DOCS and FEEDBACK_BETA
(`0:0` turns the feedback search off) and runs every question through QueryService.query in `fast`:
LoCoMo R@10 on conversations 0-4 (tuning half) and 5-9 (held out), SciFact nDCG@10 on the test and
train claims. Writes bench/results/feedback_sweep.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench.api_client import REPO, Api, LoCoMo, SciFact, dedup, ndcg10
from bench.retrieval.locomo_sweep import evaluate, pair_mapping

from ctxstore.config import Settings
from ctxstore.retrieval import feedback
from ctxstore.runtime import build_container
from ctxstore.services.registry import build_services

OUT = REPO / "bench" / "results" / "feedback_sweep.json"


def build_scifact(data: Path) -> None:
    sf = SciFact.load()
    with Api(data, env={"CTXSTORE_EXTRACTOR": "none"}) as api:
        (data.parent / "sweep_key.txt").write_text(api.key)
        api.create_db("scifact")
        t0 = time.perf_counter()
        api.ingest_app("scifact", sf.items())
        api.wait("scifact", {None: [d["_id"] for d in sf.docs]}, t0, until="searchable")


def _open(data: Path) -> tuple[Any, Any, Any]:
    container = build_container(Settings(data_dir=data, extractor="none"))
    services = build_services(container)
    return container, services.query, services.keys.authenticate((data.parent / "sweep_key.txt").read_text().strip())


def _scifact(svc: Any, principal: Any, sf: SciFact) -> dict[str, float]:
    out = {}
    for split, queries, qrels in (("test", sf.queries, sf.qrels), ("train", sf.held_out, sf.held_out_qrels)):
        runs = {}
        for qid, text in queries.items():
            body = {"database": "scifact", "query": text, "mode": "fast", "max_results": 10, "graph_context": False}
            runs[qid] = dedup(c["id"] for c in svc.query(principal, body)["chunks"])
        out[split] = ndcg10(runs, qrels)
    return out


def _set(docs: int, beta: float) -> None:
    feedback.FEEDBACK_DOCS, feedback.FEEDBACK_BETA = docs, beta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", type=Path)
    ap.add_argument("--scifact", type=Path)
    ap.add_argument("--build-scifact", action="store_true")
    ap.add_argument("--variants", default="0:0,2:0.5,2:1.0,3:0.3,3:0.5,3:0.7,3:1.0,4:0.7,5:0.3,5:0.7")
    args = ap.parse_args()
    if args.build_scifact and args.scifact:
        build_scifact(args.scifact)
    variants = [(int(d), float(b)) for d, b in (v.split(":") for v in args.variants.split(","))]
    applies = feedback.applies
    rows: dict[str, dict[str, Any]] = {f"{d}:{b}": {"docs": d, "beta": b} for d, b in variants}
    parts: list[tuple[Path, str]] = [(p, name) for p, name in ((args.locomo, "locomo"), (args.scifact, "scifact")) if p]
    for data, name in parts:
        container, svc, principal = _open(data)
        lc = LoCoMo.load() if name == "locomo" else None
        sf = SciFact.load() if name == "scifact" else None
        mapping = pair_mapping(lc) if lc is not None else {}
        for d, b in variants:
            _set(d, b)
            feedback.applies = applies if d else (lambda first, alpha: False)  # type: ignore[assignment]
            row = rows[f"{d}:{b}"]
            if lc is not None:
                row["locomo turns"] = evaluate(svc, principal, "turns", lc, None)
                row["locomo pairs"] = evaluate(svc, principal, "pairs", lc, mapping)
            if sf is not None:
                row["scifact"] = _scifact(svc, principal, sf)
            print(json.dumps(row), flush=True)
        container.close()
    feedback.applies = applies  # type: ignore[assignment]
    _set(2, 0.5)
    OUT.write_text(json.dumps({"diagnostic": "in-process", "rows": list(rows.values())}, indent=1) + "\n")


if __name__ == "__main__":
    main()
