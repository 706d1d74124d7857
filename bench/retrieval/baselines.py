"""Retrieval baselines on BEIR SciFact with the local adapters: BM25 (FTS5) only and embeddings only.

    uv run python bench/retrieval/baselines.py [--embeddings-cache] [--keep-index DIR]

Loads shared/data/beir_scifact (corpus.jsonl, queries.jsonl, qrels/test.tsv) into a fresh
SqliteSearchIndex, one chunk per document (title in the title field, abstract as text; the
embedding input is "title text", as BEIR does for dense models), then prints nDCG@10 (binary qrels,
standard log2 discount) for keyword and vector search, throughput and query latencies, and writes
bench/results/retrieval_baselines.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.keyword_lane import TITLE_WEIGHT
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.adapters.models.local_embedder import LocalEmbedder
from ctxstore.ports.search_index import ChunkDoc, Hit, SearchFilter

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "beir_scifact"
RESULTS = REPO / "bench" / "results" / "retrieval_baselines.json"
CACHE = REPO / "bench" / ".cache"

ORG, DB, COLLECTION = "bench", "scifact", "corpus"


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_qrels(path: Path) -> dict[str, set[str]]:
    qrels: dict[str, set[str]] = {}
    with path.open(encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            qid, doc_id, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, set()).add(doc_id)
    return qrels


def ndcg_at_k(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal if ideal else 0.0


def evaluate(run: Callable[[str], list[Hit]], qrels: dict[str, set[str]]) -> tuple[float, list[float]]:
    """Mean nDCG@10 over the qrels queries and per-query latencies; `run` takes a query id."""
    scores, latencies = [], []
    for qid, relevant in qrels.items():
        start = time.perf_counter()
        hits = run(qid)
        latencies.append(time.perf_counter() - start)
        scores.append(ndcg_at_k([h.item_id for h in hits], relevant))
    return statistics.fmean(scores), latencies


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def embed_corpus(
    embedder: LocalEmbedder, corpus: list[dict[str, Any]], use_cache: bool
) -> tuple[npt.NDArray[np.float32], float]:
    texts = [f"{d.get('title', '')} {d['text']}".strip() for d in corpus]
    cache_file = CACHE / f"scifact-{embedder.model_id.replace('/', '__')}-{embedder.max_tokens}.npy"
    if use_cache and cache_file.exists():
        vectors = np.load(cache_file)
        if vectors.shape == (len(texts), embedder.dim):
            sample = texts[:: max(1, len(texts) // 512)][:512]  # throughput on a spread sample
            embedder.warm_up()
            start = time.perf_counter()
            embedder.embed_documents(sample)
            return vectors.astype(np.float32), len(sample) / (time.perf_counter() - start)
    embedder.warm_up()
    start = time.perf_counter()
    vectors = embedder.embed_documents(texts)
    elapsed = time.perf_counter() - start
    if use_cache:
        CACHE.mkdir(parents=True, exist_ok=True)
        np.save(cache_file, vectors)
    return vectors, len(texts) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embeddings-cache", action="store_true", help=f"reuse/save corpus vectors under {CACHE}")
    parser.add_argument("--keep-index", type=Path, help="build the index in this folder instead of a temp one")
    parser.add_argument("--batch", type=int, default=256, help="chunks per upsert call")
    args = parser.parse_args()

    corpus = load_jsonl(DATA / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in load_jsonl(DATA / "queries.jsonl")}
    qrels = load_qrels(DATA / "qrels" / "test.tsv")
    print(f"SciFact: {len(corpus)} docs, {len(qrels)} test queries", flush=True)

    embedder = LocalEmbedder()
    t0 = time.perf_counter()
    embedder.warm_up()
    load_s = time.perf_counter() - t0
    vectors, embed_rate = embed_corpus(embedder, corpus, args.embeddings_cache)
    print(f"embedding: {embed_rate:.1f} passages/s ({embedder.model_id})", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep_index or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        index = SqliteSearchIndex(folder / "search.db")
        index.ensure_database(ORG, DB)
        docs = [
            ChunkDoc(
                chunk_id=f"{d['_id']}#0",
                item_id=d["_id"],
                database=DB,
                collection=COLLECTION,
                store="knowledge",
                text=d["text"],
                vector=vectors[i],
                title=d.get("title", ""),
            )
            for i, d in enumerate(corpus)
        ]
        start = time.perf_counter()
        for i in range(0, len(docs), args.batch):
            index.upsert(ORG, docs[i : i + args.batch])
        index_rate = len(docs) / (time.perf_counter() - start)
        print(f"indexed: {index_rate:.0f} chunks/s (batches of {args.batch}, text + FTS5 + vector BLOB)", flush=True)

        flt = SearchFilter(database=DB, collections=[COLLECTION], store="knowledge")
        bm25, kw_lat = evaluate(lambda qid: index.keyword_search(ORG, flt, queries[qid], limit=10), qrels)
        bm25_and, _ = evaluate(
            lambda qid: index.keyword_search(ORG, flt, queries[qid], limit=10, operator="and"), qrels
        )

        start = time.perf_counter()
        qvecs = {qid: embedder.embed_query(queries[qid]) for qid in qrels}
        query_embed_ms = (time.perf_counter() - start) / len(qvecs) * 1000.0
        dense, vec_lat = evaluate(lambda qid: index.vector_search(ORG, flt, qvecs[qid], limit=10), qrels)
        index.close()

    result = {
        "dataset": "BEIR SciFact test (300 queries, 5183 docs), shared/data/beir_scifact",
        "metric": "nDCG@10, binary qrels",
        "bm25_fts5_or": round(bm25, 4),
        "bm25_fts5_and": round(bm25_and, 4),
        "dense": round(dense, 4),
        "embedding_model": embedder.model_id,
        "embedding_dim": embedder.dim,
        "embedding_max_tokens": embedder.max_tokens,
        "fts5_tokenizer": "porter unicode61 remove_diacritics 2",
        "fts5_title_weight": TITLE_WEIGHT,
        "model_load_s": round(load_s, 2),
        "embed_passages_per_s": round(embed_rate, 1),
        "embed_note": "SciFact title+abstract, most truncated at 256 tokens; 2 shared cores under other load",
        "index_chunks_per_s": round(index_rate, 0),
        "query_embed_ms_mean": round(query_embed_ms, 2),
        "keyword_search_ms": {"p50": round(pct(kw_lat, 50), 3), "p95": round(pct(kw_lat, 95), 3)},
        "vector_search_ms": {"p50": round(pct(vec_lat, 50), 3), "p95": round(pct(vec_lat, 95), 3)},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
