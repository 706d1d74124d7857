"""Retrieval quality as users get it: corpora sent through POST /context/ingest, queries through POST /query.

    uv run python -m bench.retrieval.api_quality [--scifact-docs N] [--locomo-convs N] [--parts scifact,turns,pairs]

- SciFact: the 5,183 abstracts as app_knowledge notes; nDCG@10 on the 300 test claims (fast, thinking,
  auto) and on the train claims (held out: nothing here was tuned on them).
- LoCoMo, two ways an application sends a conversation (one collection per conversation):
  `turns`: one text memory per turn, "Speaker: text" (what PEERS.md compared);
  `pairs`: each session one memory of `user_assistant_pairs` (first speaker = user, named by `user_name`),
  chunked by the server one turn per chunk; a chunk maps back to its turn by its position.
  Evidence recall@10 over the 1,535 questions of categories 1-4, and per half (conversations 0-4 and
  5-9: the second half is the held-out split).
Every number comes from a real `ctxstore serve` on a fresh data dir. Writes bench/results/retrieval_api.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.api_client import REPO, Api, LoCoMo, SciFact, dedup, load, ndcg10, pct, recall10

from ctxstore.domain.conversation import pair_turns, turn_chunks

MODES = ("fast", "thinking", "auto")
OUT = REPO / "bench" / "results" / "retrieval_api.json"


def scifact(api: Api, n_docs: int) -> dict[str, Any]:
    sf = SciFact.load(n_docs)
    api.create_db("scifact")
    t0 = time.perf_counter()
    api.ingest_app("scifact", sf.items())
    ingest = api.wait("scifact", {None: [d["_id"] for d in sf.docs]}, t0)
    out: dict[str, Any] = {"docs": len(sf.docs), "ingest": ingest, "load": load()}
    for split, queries, qrels in (("test", sf.queries, sf.qrels), ("train (held out)", sf.held_out, sf.held_out_qrels)):
        res: dict[str, Any] = {}
        for mode in MODES:
            runs, lat, routed = {}, [], []
            for qid, text in queries.items():
                body = {"database": "scifact", "query": text, "mode": mode, "max_results": 10, "graph_context": False}
                dt, data = api.query(body)
                runs[qid] = dedup(c["id"] for c in data["chunks"])
                lat.append(dt)
                routed.append(data["query_plan"]["mode"])
            res[mode] = {"ndcg@10": ndcg10(runs, qrels), "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95)}
            if mode == "auto":
                res[mode]["thinking_share"] = round(routed.count("thinking") / len(routed), 3)
            print(f"  scifact {split} {mode}: {res[mode]}", flush=True)
        out[split] = res
    return out


def _query_locomo(
    api: Api, db: str, lc: LoCoMo, chunk_to_turn: dict[tuple[str, str, int], str] | None
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    halves = {s: (0 if i < len(lc.sessions) / 2 else 1) for i, s in enumerate(lc.sessions)}
    for mode in MODES:
        runs: dict[str, list[str]] = {}
        lat = []
        for qid, sid, text, _ in lc.questions:
            body = {
                "database": db,
                "collection": sid,
                "type": "memory",
                "query": text,
                "mode": mode,
                "max_results": 10,
                "graph_context": False,
            }
            dt, data = api.query(body)
            lat.append(dt)
            if chunk_to_turn is None:
                runs[qid] = dedup(c["id"] for c in data["chunks"])
            else:
                runs[qid] = dedup(chunk_to_turn.get((sid, c["id"], int(c["position"])), "") for c in data["chunks"])
        r = {"recall@10": recall10(runs, lc.questions), "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95)}
        for h in (0, 1):
            qs = [q for q in lc.questions if halves[q[1]] == h]
            if qs:
                r[f"recall@10 conversations half {h + 1}"] = recall10(runs, qs)
        res[mode] = r
        print(f"  locomo {db} {mode}: {r}", flush=True)
    return res


def locomo_turns(api: Api, lc: LoCoMo) -> dict[str, Any]:
    api.create_db("turns")
    t0 = time.perf_counter()
    for sid in lc.sessions:
        mems = [{"id": d, "text": f"{sp}: {tx}", "infer": False} for d, sp, tx in lc.turns(sid)]
        api.ingest_memories("turns", sid, mems)
    ingest = api.wait("turns", {sid: [t[0] for t in lc.turns(sid)] for sid in lc.sessions}, t0)
    return {"ingest": ingest, "load": load(), **_query_locomo(api, "turns", lc, None)}


def _pairs(session: list[tuple[str, str, str]]) -> tuple[str, list[dict[str, str]], list[str]]:
    """(user name, pairs, dia_id of each turn in the order the server chunks them)."""
    user = session[0][1]
    pairs: list[dict[str, str]] = []
    for _, speaker, text in session:
        if speaker == user or not pairs or pairs[-1]["assistant"]:
            pairs.append({"user": text if speaker == user else "", "assistant": "" if speaker == user else text})
        else:
            pairs[-1]["assistant"] = text
    by_side = iter(t[0] for t in session)  # pair_turns keeps the turns' order and skips empty sides
    order = [next(by_side) for _ in pair_turns(pairs, user)]
    return user, pairs, order


def locomo_pairs(api: Api, lc: LoCoMo) -> dict[str, Any]:
    api.create_db("pairs")
    chunk_to_turn: dict[tuple[str, str, int], str] = {}
    ids: dict[str | None, list[str]] = {}
    t0 = time.perf_counter()
    for sid, sessions in lc.sessions.items():
        mems = []
        for k, session in enumerate(sessions):
            user, pairs, order = _pairs(session)
            item = f"{sid}-s{k + 1}"
            mems.append({"id": item, "user_assistant_pairs": pairs, "user_name": user, "infer": False})
            chunks = turn_chunks(item, pair_turns(pairs, user))
            assert len(chunks) == len(order), "a turn longer than a chunk would break the position mapping"
            for c, dia in zip(chunks, order, strict=True):
                chunk_to_turn[(sid, item, c.position)] = dia
        api.ingest_memories("pairs", sid, mems, batch=50)
        ids[sid] = [m["id"] for m in mems]
    ingest = api.wait("pairs", ids, t0)
    return {"ingest": ingest, "load": load(), **_query_locomo(api, "pairs", lc, chunk_to_turn)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scifact-docs", type=int, default=0)
    ap.add_argument("--locomo-convs", type=int, default=0)
    ap.add_argument("--parts", default="scifact,turns,pairs")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--extractor",
        default="",
        help="CTXSTORE_EXTRACTOR for the server (e.g. none: no relation extraction, so the wait for"
        " `completed` is short; the chunks and every figure here are the same, graph context is off)",
    )
    args = ap.parse_args()
    parts = args.parts.split(",")
    result: dict[str, Any] = {"load_at_start": load(), "extractor": args.extractor or "default"}
    lc = LoCoMo.load(args.locomo_convs)
    env = {"CTXSTORE_EXTRACTOR": args.extractor} if args.extractor else None
    with tempfile.TemporaryDirectory() as tmp, Api(Path(tmp) / "data", env=env) as api:
        if "scifact" in parts:
            result["scifact"] = scifact(api, args.scifact_docs)
        if "turns" in parts:
            result["locomo_turns"] = locomo_turns(api, lc)
        if "pairs" in parts:
            result["locomo_pairs"] = locomo_pairs(api, lc)
    result["load_at_end"] = load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
