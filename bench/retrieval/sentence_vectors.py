"""Would sentence vectors computed at ingest lift `thinking` on SciFact? Quality and ingest cost.

    uv run python -m bench.retrieval.sentence_vectors

The question (issue 4): embedding every sentence of a chunk once at ingest would make query-time
max-sim (the best sentence's cosine) one small matrix product instead of ~2 s of embedding per
query. This measures the gain before any product change:

1. The real thinking path (`thinking.think` on a real local index, the bench's cached SciFact vectors)
   runs every query of the BEIR SciFact train (809) and test (300) splits; its top 50 is kept.
2. Every abstract sentence is embedded once (cached under bench/.cache, ~45k sentences).
3. A second fusion over the top N re-scores each candidate as
   z(thinking score) + w_sent * z(max(doc cosine, best sentence cosine))
                     + w_kw * z(raw BM25) + w_title * z(BM25 with title weight 4).
   Weights are chosen on the TRAIN split and reported on TEST, so the test number is not tuned.
   Also: sentence vectors as the vector LANE (fast-style fusion of the keyword lane with
   doc cosine + lambda x best sentence cosine over the whole corpus), which can find new candidates.
4. Ingest cost: the same 300 abstracts embedded as chunk texts and as sentences, back to back.

Writes bench/results/retrieval_sentence_vectors.json and prints the table. CPU timings are
distorted when other work shares the cores (the JSON records the load average).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from bench.retrieval.baselines import CACHE, load_jsonl, load_qrels, ndcg_at_k
from bench.retrieval.run import SCIFACT, Local, index_scifact

from ctxstore.ports.embedder import Embedder
from ctxstore.retrieval import thinking
from ctxstore.retrieval.fusion import ranked
from ctxstore.retrieval.hybrid import HybridRetriever, RetrievalScope
from ctxstore.retrieval.signals import choose_alpha, content_terms

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results" / "retrieval_sentence_vectors.json"
POOL = 50
Vectors = npt.NDArray[np.float32]


def split_sentences(text: str) -> list[str]:
    """thinking's sentence split, without its 12-sentence cap (every sentence is stored)."""
    parts = [p.strip() for p in thinking._SENTENCE.split(text) if len(p.strip()) > 20]
    return parts or [text[: thinking.MAX_SENTENCE_CHARS]]


def sentence_vectors(corpus: list[dict[str, Any]], embedder: Embedder) -> tuple[Vectors, npt.NDArray[np.int32]]:
    """All abstract sentences embedded (length-sorted batches pad less) and each one's document row."""
    name = embedder.model_id.replace("/", "__")
    vec_path, owner_path = CACHE / f"scifact-sentences-{name}.npy", CACHE / "scifact-sentences-owner.npy"
    sents, owner = [], []
    for i, d in enumerate(corpus):
        for s in split_sentences(d["text"]):
            sents.append(s)
            owner.append(i)
    if vec_path.exists() and owner_path.exists():
        vec = np.load(vec_path)
        if vec.shape[0] == len(sents):
            return vec.astype(np.float32), np.load(owner_path)
    print(f"  embedding {len(sents)} sentences (cached afterwards)", flush=True)
    vec = np.zeros((len(sents), embedder.dim), np.float32)
    order = np.argsort([len(s) for s in sents])
    for k in range(0, len(sents), 256):
        idx = order[k : k + 256]
        vec[idx] = embedder.embed_documents([sents[j] for j in idx])
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(vec_path, vec)
    np.save(owner_path, np.asarray(owner, np.int32))
    return vec, np.asarray(owner, np.int32)


def ingest_cost(corpus: list[dict[str, Any]], embedder: Embedder, n: int = 300) -> dict[str, Any]:
    docs = corpus[:: max(1, len(corpus) // n)][:n]
    texts = [f"{d.get('title', '')}\n{d['text']}" for d in docs]
    sents = [s for d in docs for s in split_sentences(d["text"])]
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        embedder.embed_documents(texts[i : i + 64])
    t_chunks = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(0, len(sents), 64):
        embedder.embed_documents(sents[i : i + 64])
    t_sents = time.perf_counter() - t0
    return {
        "abstracts": len(docs),
        "sentences": len(sents),
        "chunk_embedding_s": round(t_chunks, 2),
        "sentence_embedding_s": round(t_sents, 2),
        "extra_ingest_embedding": round(t_sents / t_chunks, 2),
    }


def z(x: Any) -> npt.NDArray[np.float64]:
    a = np.asarray(x, dtype=np.float64)
    return (a - a.mean()) / (a.std() or 1.0)


def clipped_z(hits: dict[str, float]) -> dict[str, float]:
    """The product's fusion normalisation (retrieval/fusion.py): z-score, clipped at 0."""
    if not hits:
        return {}
    v = np.fromiter(hits.values(), dtype=np.float64)
    mean, std = float(v.mean()), float(v.std()) or 1.0
    return {k: max(0.0, (x - mean) / std) for k, x in hits.items()}


class TitleBm25:
    """A private FTS5 index with the title weighted 4 (the product's keyword lane uses 2)."""

    def __init__(self, corpus: list[dict[str, Any]]) -> None:
        self.ids = [d["_id"] for d in corpus]
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE f USING fts5(title, text, tokenize='porter unicode61 remove_diacritics 2')"
        )
        self.db.executemany(
            "INSERT INTO f(rowid, title, text) VALUES (?, ?, ?)",
            [(i, d.get("title", ""), d["text"]) for i, d in enumerate(corpus)],
        )

    def scores(self, query: str, limit: int = 300) -> dict[str, float]:
        terms = [t for t in content_terms(query) if re.fullmatch(r"\w+", t)]
        if not terms:
            return {}
        rows = self.db.execute(
            "SELECT rowid, -bm25(f, 4.0, 1.0) FROM f WHERE f MATCH ? ORDER BY bm25(f, 4.0, 1.0) LIMIT ?",
            (" OR ".join(f'"{t}"' for t in terms), limit),
        ).fetchall()
        return {self.ids[r]: s for r, s in rows}


def main() -> None:
    corpus = load_jsonl(SCIFACT / "corpus.jsonl")
    row = {d["_id"]: i for i, d in enumerate(corpus)}
    queries = {q["_id"]: q["text"] for q in load_jsonl(SCIFACT / "queries.jsonl")}
    splits = {s: load_qrels(SCIFACT / "qrels" / f"{s}.tsv") for s in ("train", "test")}
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory() as tmp:
        local = Local(Path(tmp) / "data")
        try:
            embedder = local.container.embedder
            assert embedder is not None
            docvec = np.load(CACHE / f"scifact-{embedder.model_id.replace('/', '__')}-256.npy").astype(np.float32)
            sv, owner = sentence_vectors(corpus, embedder)
            starts = np.searchsorted(owner, np.arange(len(corpus)))
            ends = np.searchsorted(owner, np.arange(len(corpus)), "right")
            print("Ingest cost (same abstracts as chunks, then as sentences)", flush=True)
            result["ingest_cost"] = ingest_cost(corpus, embedder)
            print(f"  {result['ingest_cost']}", flush=True)
            org = index_scifact(local, corpus, docvec)
            r = HybridRetriever(local.index, embedder)
            scope = RetrievalScope(org=org, database="scifact", collections=[""], stores=["knowledge"])
            title_bm25 = TitleBm25(corpus)
            feats: dict[str, list[tuple[set[str], list[str], dict[str, Any]]]] = {}
            think_ms, maxsim_ms, lane_ms = [], [], []
            # Per query: raw keyword hits, every document's cosine, every document's best sentence cosine.
            lanes: dict[str, dict[str, tuple[dict[str, float], Any, Any]]] = {s: {} for s in splits}
            for split, qrels in splits.items():
                print(f"Thinking pools, {split} split ({len(qrels)} queries)", flush=True)
                out = feats[split] = []
                for qid, relevant in qrels.items():
                    q = queries[qid]
                    t0 = time.perf_counter()
                    first = r.run(scope, q, q, keyword=True, vector=True, operator="or", depth=100)
                    kw_hits = sum(len(lh.hits) for lh in first.lanes if lh.lane == "keyword")
                    vec_hits = sum(len(lh.hits) for lh in first.lanes if lh.lane == "vector")
                    alpha = choose_alpha(q, kw_hits, vec_hits).alpha
                    plan = thinking.think(r, scope, q, q, first, alpha=alpha, operator="or", depth=100, text_only=False)
                    think_ms.append((time.perf_counter() - t0) * 1000)
                    pool = ranked(plan.candidates.values())[:POOL]
                    ids = [c.item_id for c in pool]
                    assert first.vector is not None
                    t0 = time.perf_counter()
                    rows = [row[i] for i in ids]
                    best = np.array([float((sv[starts[k] : ends[k]] @ first.vector).max()) for k in rows])
                    maxsim_ms.append((time.perf_counter() - t0) * 1000)
                    raw_kw = {h.item_id: h.score for lh in first.lanes if lh.lane == "keyword" for h in lh.hits}
                    tb = title_bm25.scores(q)
                    t0 = time.perf_counter()
                    lanes[split][qid] = (
                        raw_kw,
                        docvec @ first.vector,
                        np.maximum.reduceat(sv @ first.vector, starts),
                    )
                    lane_ms.append((time.perf_counter() - t0) * 1000)
                    out.append(
                        (
                            relevant,
                            ids,
                            {
                                "think": np.array([c.score for c in pool]),
                                "sent": np.maximum(best, docvec[rows] @ first.vector),
                                "kw": np.array([raw_kw.get(i, 0.0) for i in ids]),
                                "title": np.array([tb.get(i, 0.0) for i in ids]),
                            },
                        )
                    )
        finally:
            local.close()

    def score(split: str, n: int, w: dict[str, float]) -> float:
        vals = []
        for relevant, ids, f in feats[split]:
            s = z(f["think"][:n]) + sum(wv * z(f[k][:n]) for k, wv in w.items() if wv)
            order = [ids[k] for k in np.argsort(-s, kind="stable")] + ids[n:]
            vals.append(ndcg_at_k(order, relevant))
        return float(statistics.fmean(vals))

    def sentence_lane(split: str, lam: float, alpha: float) -> float:
        """fast-style fusion (clipped z, top 100 per lane) with the vector score doc + lam x best sentence."""
        vals = []
        for qid, relevant in splits[split].items():
            raw_kw, doc, sent = lanes[split][qid]
            v = doc + lam * sent
            top = np.argsort(-v)[:100]
            vec = clipped_z({ids_all[k]: float(v[k]) for k in top})
            kw = clipped_z(raw_kw)
            fused = {k: (1 - alpha) * kw.get(k, 0.0) + alpha * vec.get(k, 0.0) for k in set(vec) | set(kw)}
            vals.append(ndcg_at_k(sorted(fused, key=lambda k: (-fused[k], k))[:10], relevant))
        return float(statistics.fmean(vals))

    ids_all = [d["_id"] for d in corpus]
    lane_grid = [
        {
            "lambda": lam,
            "alpha": a,
            "train": round(sentence_lane("train", lam, a), 4),
            "test": round(sentence_lane("test", lam, a), 4),
        }
        for lam, a in itertools.product((0.0, 0.5, 1.0, 1.5), (0.45, 0.5, 0.55))
    ]
    lane_best = max((g for g in lane_grid if g["lambda"] > 0), key=lambda g: g["train"])
    lane_base = next(g for g in lane_grid if g["lambda"] == 0.0 and g["alpha"] == 0.5)
    grid = []
    for n, ws, wk, wt in itertools.product((30, 50), (0.0, 0.25, 0.5, 1.0), (0.0, 0.2), (0.0, 0.2, 0.4)):
        w = {"sent": ws, "kw": wk, "title": wt}
        grid.append(
            {"pool": n, "weights": w, "train": round(score("train", n, w), 4), "test": round(score("test", n, w), 4)}
        )
    base = {"train": round(score("train", POOL, {}), 4), "test": round(score("test", POOL, {}), 4)}
    without_sent = max((g for g in grid if g["weights"]["sent"] == 0.0), key=lambda g: g["train"])
    sent_only = max(
        (g for g in grid if g["weights"]["kw"] == 0.0 and g["weights"]["title"] == 0.0), key=lambda g: g["train"]
    )
    best = max(grid, key=lambda g: g["train"])
    result.update(
        {
            "queries": {s: len(q) for s, q in splits.items()},
            "thinking": base,
            "chosen_on_train": {
                "keyword re-fusion only": without_sent,
                "sentence max-sim only": sent_only,
                "all": best,
            },
            "grid": grid,
            "sentence_lane": {
                "doc cosine only (alpha 0.5)": lane_base,
                "chosen on train": lane_best,
                "grid": lane_grid,
            },
            "ms_per_query": {
                "thinking p50": round(statistics.median(think_ms), 1),
                "max-sim over the pool p50": round(statistics.median(maxsim_ms), 3),
                "sentence lane (5,183 doc + 44,798 sentence cosines) p50": round(statistics.median(lane_ms), 2),
            },
        }
    )
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print("\n| SciFact nDCG@10 (weights chosen on train) | train (809 q) | test (300 q) |\n|---|---|---|")
    print(f"| thinking today | {base['train']:.4f} | {base['test']:.4f} |")
    for name, g in result["chosen_on_train"].items():
        print(f"| + {name}: pool {g['pool']}, {g['weights']} | {g['train']:.4f} | {g['test']:.4f} |")
    for name, g in (("doc cosine only", lane_base), ("doc + best sentence, chosen on train", lane_best)):
        print(
            f"| vector lane = {name}: lambda {g['lambda']}, alpha {g['alpha']} | {g['train']:.4f} | {g['test']:.4f} |"
        )
    print(f"\ningest: {result['ingest_cost']}\nper query: {result['ms_per_query']}\nwrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
