"""ctxstore next to the tools its users would pick instead, on the same corpora, model and machine.

    ./bench/peers/setup.sh                      # once: the peers' pinned venvs and the shared ONNX model
    uv run python -m bench.peers.run [--rounds 2] [--docs N] [--systems ctxstore,chroma,lancedb,txtai,mem0]
                                     [--phases embedder,scifact,locomo] [--locomo-convs N] [--wait-load 3]

ctxstore runs as `ctxstore serve` on a fresh data dir per round, driven over HTTP (bench/api_client.py);
each peer runs in-process in its own venv (peer_worker.py; none of them is a ctxstore dependency), one
subprocess per system and round, alternating systems within a round so machine load hits all alike. Every
system embeds with the same all-MiniLM-L6-v2 ONNX graph (export_model.py: ctxstore's graph builder over
the weights ctxstore ships), int8, one text per call, 2 threads. Per system: time until the SciFact corpus
is searchable (and, for ctxstore, completed), nDCG@10 on the 300 test claims, query p50/p95, LoCoMo
evidence recall@10 (each turn one memory/document; ctxstore also with sessions as user_assistant_pairs),
and the bare embedder's rate on the same texts. Writes bench/results/peers.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.api_client import REPO, Api, LoCoMo, SciFact, dedup, load, ndcg10, pct, recall10
from bench.retrieval.api_quality import locomo_pairs, locomo_turns

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("PEERS_HOME", str(Path.home() / ".cache" / "ctxstore-peers")))
VENV = {"chroma": "chroma", "lancedb": "lancedb", "txtai": "txtai", "mem0": "mem0", "embedder": "chroma"}
OUT = REPO / "bench" / "results" / "peers.json"


def log(*a: Any) -> None:
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def wait_for_quiet(limit: float, max_wait: float) -> dict[str, Any]:
    t0 = time.time()
    while os.getloadavg()[0] > limit and time.time() - t0 < max_wait:
        time.sleep(15)
    return {"load_at_start": load(), "waited_s": round(time.time() - t0, 1)}


def run_peer(system: str, tag: str, task: dict[str, Any], scratch: Path) -> dict[str, Any]:
    work = scratch / f"{system}_{tag}"
    work.mkdir(parents=True)
    task_path, out_path = scratch / f"task_{system}_{tag}.json", scratch / f"out_{system}_{tag}.json"
    task_path.write_text(json.dumps({**task, "workdir": str(work)}))
    py = PEERS / VENV[system] / "bin" / "python"
    t = time.perf_counter()
    logf = scratch / f"{system}_{tag}.log"
    with logf.open("w") as lf:
        env = {**os.environ, "RUST_LOG": "error", "PEERS_HOME": str(PEERS)}
        p = subprocess.run(
            [str(py), str(HERE / "peer_worker.py"), system, str(task_path), str(out_path)],
            stdout=lf,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}", "log_tail": logf.read_text()[-2000:]}
    out: dict[str, Any] = json.loads(out_path.read_text())
    out["process_wall_s"] = round(time.perf_counter() - t, 2)
    return out


def embedder(sf: SciFact, scratch: Path, tag: str, sample: int) -> dict[str, Any]:
    """The bare embedder's rate on (a spread sample of) the same texts: the physical reference."""
    docs = [[d["_id"], t] for d, t in zip(sf.docs, sf.texts(), strict=True)]
    if sample and sample < len(docs):
        docs = docs[:: max(1, len(docs) // sample)][:sample]
    res = {"load_before": load()}
    out = run_peer("embedder", tag, {"docs": docs, "queries": [], "precisions": ["int8"]}, scratch)
    return res | (out.get("int8") or out)


def ctx_scifact(sf: SciFact, scratch: Path, rnd: int, completed_cap: float) -> dict[str, Any]:
    with Api(scratch / f"ctxstore_r{rnd}") as api:
        t0, res = api.timed_scifact(sf, until="searchable")
        # Each round puts the other mode first: the second sees query vectors the first cached.
        modes = ["fast", "thinking"] if rnd % 2 else ["thinking", "fast"]
        for k, mode in enumerate(modes):
            runs, lat = {}, []
            for qid, text in sf.queries.items():
                body = {"database": "scifact", "query": text, "mode": mode, "max_results": 10, "graph_context": False}
                dt, data = api.query(body)
                runs[qid] = dedup(c["id"] for c in data["chunks"])
                lat.append(dt)
            res[mode] = {
                "ndcg@10": ndcg10(runs, sf.qrels),
                "p50_ms": pct(lat, 50),
                "p95_ms": pct(lat, 95),
                "query_texts_seen_before": k == 1,
            }
        if rnd == 1:  # auto, and the held-out claims (SciFact train split: nothing was tuned on them)
            for mode, queries, qrels in (
                ("auto", sf.queries, sf.qrels),
                ("fast held-out", sf.held_out, sf.held_out_qrels),
                ("thinking held-out", sf.held_out, sf.held_out_qrels),
            ):
                runs, routed = {}, []
                for qid, text in queries.items():
                    body = {
                        "database": "scifact",
                        "query": text,
                        "mode": mode.split()[0],
                        "max_results": 10,
                        "graph_context": False,
                    }
                    _, data = api.query(body)
                    runs[qid] = dedup(c["id"] for c in data["chunks"])
                    routed.append(data["query_plan"]["mode"])
                res[mode] = {"ndcg@10": ndcg10(runs, qrels), "queries": len(queries)}
                if mode == "auto":
                    res[mode]["thinking_share"] = round(routed.count("thinking") / len(routed), 3)
        # The queries ran while the graph step went on (as a user would query); now its end.
        done = api.wait("scifact", {None: [d["_id"] for d in sf.docs]}, t0, until="completed", limit_s=completed_cap)
        res["completed_s"] = done["completed_s"]
        res["completed_items"] = done["completed_items"]
        if done["completed_s"] is not None:
            res["docs_per_s_completed"] = round(len(sf.docs) / done["completed_s"], 1)
        return res


def peer_scifact(system: str, sf: SciFact, scratch: Path, rnd: int) -> dict[str, Any]:
    docs = [[d["_id"], t] for d, t in zip(sf.docs, sf.texts(), strict=True)]
    warm = ["Warm-up query about cells.", "Another warm-up query."]
    res: dict[str, Any] = {"load_before_ingest": load()}
    task = {"docs": docs, "queries": [[q, "", t] for q, t in sf.queries.items()], "warm": warm, "precision": "int8"}
    out = run_peer(system, f"scifact_r{rnd}", task, scratch)
    if "error" in out:
        return res | out
    lat, runs = out.pop("lat_ms"), out.pop("runs")
    res.update(out)
    res["docs_per_s_searchable"] = round(out["docs"] / out["ingest_s"], 1)
    res["ndcg@10"] = ndcg10(runs, sf.qrels)
    res["p50_ms"], res["p95_ms"] = pct(lat, 50), pct(lat, 95)
    return res


def peer_locomo(system: str, lc: LoCoMo, scratch: Path) -> dict[str, Any]:
    cols = {sid: [[d, f"{sp}: {tx}"] for d, sp, tx in lc.turns(sid)] for sid in lc.sessions}
    res: dict[str, Any] = {"load_before_ingest": load()}
    task = {
        "collections": cols,
        "queries": [[q, s, t] for q, s, t, _ in lc.questions],
        "warm": ["What did she do?"],
        "precision": "int8",
    }
    out = run_peer(system, "locomo", task, scratch)
    if "error" in out:
        return res | out
    lat, runs = out.pop("lat_ms"), out.pop("runs")
    res.update(ingest_s=out["ingest_s"], turns=out["docs"], info=out["info"])
    res["recall@10"] = recall10(runs, lc.questions)
    halves = {s: (0 if i < len(lc.sessions) / 2 else 1) for i, s in enumerate(lc.sessions)}
    for h in (0, 1):
        qs = [q for q in lc.questions if halves[q[1]] == h]
        if qs:
            res[f"recall@10 conversations half {h + 1}"] = recall10(runs, qs)
    res["p50_ms"], res["p95_ms"] = pct(lat, 50), pct(lat, 95)
    return res


def table(run: dict[str, Any]) -> str:
    lines = [
        "| system | SciFact docs/s to all searchable (per round) | nDCG@10 | p50 / p95 ms | LoCoMo R@10 (turns) |",
        "|---|---|---|---|---|",
    ]
    loc = run.get("locomo", {})
    for system, rounds in run.get("scifact", {}).items():
        rates = " / ".join(str(r.get("docs_per_s_searchable", "error")) for r in rounds)
        if system == "ctxstore":
            for mode in ("fast", "thinking"):
                r0 = rounds[0].get(mode, {})
                lat = " ; ".join(f"{r[mode]['p50_ms']} / {r[mode]['p95_ms']}" for r in rounds if mode in r)
                rec = loc.get("ctxstore_turns", {}).get(mode, {}).get("recall@10", "")
                lines.append(f"| ctxstore `{mode}` (HTTP) | {rates} | {r0.get('ndcg@10', '')} | {lat} | {rec} |")
            continue
        lat = " ; ".join(f"{r.get('p50_ms')} / {r.get('p95_ms')}" for r in rounds)
        lines.append(
            f"| {system} | {rates} | {rounds[0].get('ndcg@10', '')} | {lat} | "
            f"{loc.get(system, {}).get('recall@10', '')} |"
        )
    emb = run.get("embedder", [])
    if emb:
        lines.append(f"| bare embedder, same texts | {' / '.join(str(e.get('texts_per_s')) for e in emb)} | | | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--docs", type=int, default=0, help="first N SciFact docs only (smoke test)")
    ap.add_argument("--systems", default="ctxstore,chroma,lancedb,txtai,mem0")
    ap.add_argument("--phases", default="embedder,scifact,locomo")
    ap.add_argument("--locomo-convs", type=int, default=0)
    ap.add_argument("--locomo-systems", default="", help="systems run on LoCoMo (default: --systems)")
    ap.add_argument("--embedder-sample", type=int, default=0, help="bare embedder on N of the texts (0: all)")
    ap.add_argument("--completed-cap", type=float, default=1800, help="longest wait for ctxstore's completed")
    ap.add_argument("--keep", type=Path, default=None, help="keep ctxstore's LoCoMo data dir here")
    ap.add_argument("--wait-load", type=float, default=3.0)
    ap.add_argument("--max-wait", type=float, default=300)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    systems, phases = args.systems.split(","), args.phases.split(",")
    run: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "args": vars(args) | {"out": str(args.out)}}
    run["quiet_wait"] = wait_for_quiet(args.wait_load, args.max_wait)
    sf = SciFact.load(args.docs)

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(run, indent=1, default=str) + "\n")

    with tempfile.TemporaryDirectory(prefix="ctxstore-peers-") as tmp:
        scratch = Path(tmp)
        if "embedder" in phases:
            run["embedder"] = [embedder(sf, scratch, "before", args.embedder_sample)]
            log("embedder", run["embedder"][-1])
        if "scifact" in phases:
            run["scifact"] = {s: [] for s in systems}
            for rnd in range(1, args.rounds + 1):
                for s in systems:
                    log(f"round {rnd}: {s} (load {load()})")
                    r = (
                        ctx_scifact(sf, scratch, rnd, args.completed_cap)
                        if s == "ctxstore"
                        else peer_scifact(s, sf, scratch, rnd)
                    )
                    run["scifact"][s].append(r)
                    log(s, {k: v for k, v in r.items() if k not in ("log_tail", "info")})
                    save()
        if "embedder" in phases:
            run["embedder"].append(embedder(sf, scratch, "after", args.embedder_sample))
            log("embedder", run["embedder"][-1])
        if "locomo" in phases:
            lc = LoCoMo.load(args.locomo_convs)
            run["locomo"] = {"turns": sum(len(lc.turns(s)) for s in lc.sessions), "questions": len(lc.questions)}
            for s in (args.locomo_systems or args.systems).split(","):
                log(f"locomo: {s} (load {load()})")
                if s == "ctxstore":
                    data = (args.keep or scratch) / "ctxstore_locomo"
                    with Api(data) as api:
                        (data.parent / "ctxstore_locomo.key").write_text(api.key)
                        run["locomo"]["ctxstore_turns"] = locomo_turns(api, lc)
                        run["locomo"]["ctxstore_pairs"] = locomo_pairs(api, lc)
                else:
                    run["locomo"][s] = peer_locomo(s, lc, scratch)
                save()
            peers = [s for s in systems if s != "ctxstore" and "recall@10" in run["locomo"].get(s, {})]
            if peers:
                run["locomo"]["best_peer"] = max(peers, key=lambda s: run["locomo"][s]["recall@10"])
    sf_means = {
        s: statistics.fmean(r["docs_per_s_searchable"] for r in rs if "docs_per_s_searchable" in r)
        for s, rs in run.get("scifact", {}).items()
        if any("docs_per_s_searchable" in r for r in rs)
    }
    run["scifact_mean_docs_per_s_searchable"] = {s: round(v, 1) for s, v in sf_means.items()}
    rates = [e["texts_per_s"] for e in run.get("embedder", []) if "texts_per_s" in e]
    if rates and "ctxstore" in sf_means:
        embed_s = len(sf.docs) / statistics.fmean(rates)
        ctx = [r for r in run["scifact"]["ctxstore"] if "searchable_s" in r]
        run["searchable_vs_bare_embedder"] = {
            "embedder_s_same_texts": round(embed_s, 1),
            "ctxstore_searchable_s": [r["searchable_s"] for r in ctx],
            "ratio": [round(r["searchable_s"] / embed_s, 3) for r in ctx],
            "ctxstore_completed_s": [r.get("completed_s") for r in ctx],
            "graph_share_of_completed": [
                round(1 - r["searchable_s"] / r["completed_s"], 3) if r.get("completed_s") else None for r in ctx
            ],
        }
    run["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    run["load_at_end"] = load()
    save()
    print(table(run))


if __name__ == "__main__":
    main()
