"""Diagnostic (in-process, not a product figure): LoCoMo recall@10 of keyword-lane and fusion variants.

    uv run python -m bench.retrieval.locomo_sweep --data DIR [--build]

`--build` ingests LoCoMo through a real `ctxstore serve` into DIR (one text memory per turn, and each
session as user_assistant_pairs), as bench/retrieval/api_quality.py does; then the stopped data dir is
opened in-process and every variant runs through QueryService.query, reporting recall@10 on conversations
0-4 (tuning half) and 5-9 (held-out half) separately. Writes bench/results/locomo_sweep.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

from bench.api_client import REPO, Api, LoCoMo, dedup, recall10
from bench.retrieval.api_quality import _pairs, locomo_pairs, locomo_turns

import ctxstore.adapters.local.keyword_lane as lane
import ctxstore.retrieval.signals as signals
import ctxstore.services.query.service as query_service
from ctxstore.config import Settings
from ctxstore.domain.conversation import pair_turns, turn_chunks
from ctxstore.runtime import build_container
from ctxstore.services.registry import build_services


def evaluate(
    svc: Any, principal: Any, db: str, lc: LoCoMo, mapping: dict[tuple[str, str, int], str] | None
) -> dict[str, float]:
    runs: dict[str, list[str]] = {}
    for qid, sid, text, _ in lc.questions:
        body = {"database": db, "collection": sid, "type": "memory", "query": text, "mode": "fast", "max_results": 10}
        data = svc.query(principal, {**body, "graph_context": False})
        if mapping is None:
            runs[qid] = dedup(c["id"] for c in data["chunks"])
        else:
            runs[qid] = dedup(mapping.get((sid, c["id"], int(c["position"])), "") for c in data["chunks"])
    half = {s: i < len(lc.sessions) / 2 for i, s in enumerate(lc.sessions)}
    return {
        "all": recall10(runs, lc.questions),
        "tune (conv 0-4)": recall10(runs, [q for q in lc.questions if half[q[1]]]),
        "held-out (conv 5-9)": recall10(runs, [q for q in lc.questions if not half[q[1]]]),
    }


def pair_mapping(lc: LoCoMo) -> dict[tuple[str, str, int], str]:
    """(conversation, session item, chunk position) -> dia_id, for sessions sent as user_assistant_pairs."""
    mapping: dict[tuple[str, str, int], str] = {}
    for sid, sessions in lc.sessions.items():
        for k, session in enumerate(sessions):
            user, pairs, order = _pairs(session)
            for c, dia in zip(turn_chunks(f"{sid}-s{k + 1}", pair_turns(pairs, user)), order, strict=True):
                mapping[(sid, f"{sid}-s{k + 1}", c.position)] = dia
    return mapping


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--pairs", action="store_true", help="also build and score the user_assistant_pairs form")
    ap.add_argument("--k1", default="1.2,0.9")
    ap.add_argument("--b", default="0.75,0.5,0.3")
    ap.add_argument("--alpha", default="auto")
    args = ap.parse_args()
    lc = LoCoMo.load()
    key_file = args.data.parent / "sweep_key.txt"
    if args.build:
        with Api(args.data) as api:
            key_file.write_text(api.key)
            locomo_turns(api, lc)
            if args.pairs:
                locomo_pairs(api, lc)
    mapping = pair_mapping(lc)
    container = build_container(Settings(data_dir=args.data))
    services = build_services(container)
    principal = services.keys.authenticate(key_file.read_text().strip())
    assert services.query is not None
    svc = services.query
    base_alpha = signals.choose_alpha
    results: list[dict[str, Any]] = []
    k1s = [float(x) for x in args.k1.split(",")]
    bs = [float(x) for x in args.b.split(",")]
    alphas = [None if x == "auto" else float(x) for x in args.alpha.split(",")]
    for k1, b, alpha in itertools.product(k1s, bs, alphas):
        lane.BM25_K1, lane.BM25_B = k1, b

        def alpha_of(q: str, kw: int, vec: int, alpha: float | None = alpha) -> signals.AlphaChoice:
            choice = base_alpha(q, kw, vec)
            return choice if alpha is None or kw == 0 or vec == 0 else signals.AlphaChoice(alpha, "sweep")

        query_service.choose_alpha = alpha_of  # type: ignore[assignment]
        row = {"k1": k1, "b": b, "alpha": "auto" if alpha is None else alpha}
        row["turns"] = evaluate(svc, principal, "turns", lc, None)
        if args.pairs:
            row["pairs"] = evaluate(svc, principal, "pairs", lc, mapping)
        print(json.dumps(row), flush=True)
        results.append(row)
    container.close()
    out = REPO / "bench" / "results" / "locomo_sweep.json"
    out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
