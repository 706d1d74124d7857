"""Retrieval benchmark: quality (SciFact nDCG@10, LoCoMo evidence recall) and HTTP latency of POST /query.

    uv run python -m bench.retrieval.run [--quick] [--skip-latency] [--skip-quality | --latency-only]

Quality runs through the query service's real path (QueryService.query: validation, lanes, fusion,
routing, thinking) on a real local container; corpora are written into the search index directly
(one chunk per SciFact document as in baselines.py; one memory chunk per LoCoMo turn, built by the
pipeline's conversation chunker, so each turn's vector also sees the previous turn), with their
vectors computed by the real embedder and cached under bench/.cache. Baselines in the same run:
FTS5 BM25 alone and the embedding model alone (the index's keyword_search / vector_search).

Latency runs a real `ctxstore serve` subprocess over HTTP on loopback, with 10k and 100k chunks:
SciFact documents plus synthetic chunks made of SciFact sentences, with perturbed SciFact vectors
(the vector cost depends on the row count, not on the content). Each timed request uses a query
text the server has not seen, so the query embedding is never a cache hit.

Writes bench/results/retrieval.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
from bench.retrieval.baselines import CACHE, load_jsonl, load_qrels, ndcg_at_k
from tests.support.server import ServerProcess

from ctxstore.config import Settings
from ctxstore.domain.chunking import embedding_input
from ctxstore.domain.conversation import Turn, turn_chunks
from ctxstore.pipeline.jobs import queue_specs
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.ports.search_index import ChunkDoc, SearchFilter, SearchIndex
from ctxstore.runtime import build_container
from ctxstore.services.access.principal import Principal
from ctxstore.services.registry import Services, build_services

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
SCIFACT = SHARED / "beir_scifact"
LOCOMO = SHARED / "locomo" / "locomo10.json"
RESULTS = REPO / "bench" / "results" / "retrieval.json"
Vectors = npt.NDArray[np.float32]


# ---- a real local ctxstore -----------------------------------------------------------------------


class Local:
    def __init__(self, data_dir: Path) -> None:
        self.container = build_container(Settings(data_dir=data_dir))
        self.services: Services = build_services(self.container)
        self.key = self.services.keys.bootstrap_default() or self.services.keys.create("default")
        self.principal: Principal = self.services.keys.authenticate(self.key)
        self.runner = LocalRunner(self.container.queue, queue_specs(self.services))

    @property
    def index(self) -> SearchIndex:
        assert self.container.search_index is not None
        return self.container.search_index

    def create_database(self, name: str) -> None:
        self.services.databases.create(self.principal, name, None, "database_metadata_schema")
        self.runner.drain()

    def query(self, **body: Any) -> dict[str, Any]:
        assert self.services.query is not None
        return self.services.query.query(self.principal, body)

    def close(self) -> None:
        self.container.close()


def embed_cached(name: str, texts: list[str], local: Local) -> Vectors:
    embedder = local.container.embedder
    assert embedder is not None
    path = CACHE / f"{name}-{embedder.model_id.replace('/', '__')}.npy"
    if path.exists():
        vectors = np.load(path)
        if vectors.shape == (len(texts), embedder.dim):
            return vectors.astype(np.float32)
    out = [embedder.embed_documents(texts[i : i + 256]) for i in range(0, len(texts), 256)]
    vectors = np.concatenate(out).astype(np.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def upsert(index: SearchIndex, org: str, docs: list[ChunkDoc], batch: int = 1000) -> None:
    for i in range(0, len(docs), batch):
        index.upsert(org, docs[i : i + batch])


def dedup(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


# ---- SciFact -------------------------------------------------------------------------------------


def index_scifact(local: Local, corpus: list[dict[str, Any]], vectors: Vectors) -> str:
    """SciFact as the benchmarks index it: one knowledge chunk per document (title + abstract); returns the org."""
    local.create_database("scifact")
    org = local.principal.org
    upsert(
        local.index,
        org,
        [
            ChunkDoc(
                f"{d['_id']}#0",
                d["_id"],
                "scifact",
                "",
                "knowledge",
                d["text"],
                vectors[i],
                title=d.get("title", ""),
                source_type="file",
            )
            for i, d in enumerate(corpus)
        ],
    )
    return org


def scifact(local: Local, quick: bool) -> dict[str, Any]:
    corpus = load_jsonl(SCIFACT / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in load_jsonl(SCIFACT / "queries.jsonl")}
    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    if quick:
        qrels = dict(list(qrels.items())[:100])
    embedder = local.container.embedder
    assert embedder is not None
    # Same vectors as baselines.py: "title abstract", truncated by the model at 256 tokens.
    base_cache = CACHE / f"scifact-{embedder.model_id.replace('/', '__')}-256.npy"
    if base_cache.exists():
        vectors = np.load(base_cache).astype(np.float32)
    else:
        vectors = embed_cached("scifact", [f"{d.get('title', '')} {d['text']}".strip() for d in corpus], local)
    org = index_scifact(local, corpus, vectors)
    flt = SearchFilter(database="scifact", collections=[""], store="knowledge")

    def service(**kw: Any) -> Callable[[str], list[str]]:
        def run(qid: str) -> list[str]:
            d = local.query(database="scifact", query=queries[qid], max_results=10, graph_context=False, **kw)
            return dedup(c["id"] for c in d["chunks"])

        return run

    qvecs = {qid: embedder.embed_query(queries[qid]) for qid in qrels}
    systems: dict[str, Callable[[str], list[str]]] = {
        "bm25 (FTS5 alone)": lambda q: [h.item_id for h in local.index.keyword_search(org, flt, queries[q], limit=10)],
        "embedding alone": lambda q: [h.item_id for h in local.index.vector_search(org, flt, qvecs[q], limit=10)],
        "text": service(query_by="text", mode="fast"),
        "fast": service(mode="fast"),
        "fast alpha=0.5": service(mode="fast", alpha=0.5),
        "thinking": service(mode="thinking"),
        "auto": service(mode="auto"),
    }
    out: dict[str, Any] = {"queries": len(qrels), "docs": len(corpus), "ndcg@10": {}, "ms_per_query": {}}
    routes: list[str] = []
    for name, run in systems.items():
        scores, times = [], []
        for qid, relevant in qrels.items():
            ranked, secs = timed(lambda qid=qid, run=run: run(qid))
            scores.append(ndcg_at_k(ranked, relevant))
            times.append(secs)
        out["ndcg@10"][name] = round(statistics.fmean(scores), 4)
        out["ms_per_query"][name] = round(statistics.median(times) * 1000, 1)
        print(f"  scifact {name:<20} nDCG@10 {out['ndcg@10'][name]:.4f}", flush=True)
    for qid in qrels:
        routes.append(local.query(database="scifact", query=queries[qid], mode="auto")["query_plan"]["mode"])
    out["auto_thinking_share"] = round(routes.count("thinking") / len(routes), 3)
    return out


# ---- LoCoMo --------------------------------------------------------------------------------------

_SPLIT = re.compile(r"[;\s]+")


def _session_time(text: str) -> float:
    try:
        return datetime.strptime(text, "%I:%M %p on %d %B, %Y").timestamp()
    except ValueError:
        return 0.0


def locomo(local: Local, quick: bool) -> dict[str, Any]:
    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
    if quick:
        samples = samples[:2]
    # Each session is one conversation memory, chunked by the pipeline's own function: one chunk per
    # turn ("Speaker: text"), embedded with the end of the previous turn as context.
    turns: list[tuple[str, str, str, float]] = []  # sample, dia_id, text, time
    embed_texts: list[str] = []
    for s in samples:
        conv = s["conversation"]
        for key, value in conv.items():
            if not re.fullmatch(r"session_\d+", key):
                continue
            when = _session_time(conv.get(f"{key}_date_time", ""))
            session = [
                Turn(
                    t["speaker"],
                    t["text"] + (f" [shares an image: {t['blip_caption']}]" if t.get("blip_caption") else ""),
                )
                for t in value
            ]
            chunks = turn_chunks(f"{s['sample_id']}/{key}", session)
            assert len(chunks) == len(value), "a LoCoMo turn longer than a chunk would break the turn ids"
            for t, c in zip(value, chunks, strict=True):
                turns.append((s["sample_id"], t["dia_id"], c.text, when))
                embed_texts.append(embedding_input("", c))
    vectors = embed_cached(f"locomo-turnctx{'-quick' if quick else ''}", embed_texts, local)
    local.create_database("locomo")
    org = local.principal.org
    upsert(
        local.index,
        org,
        [
            ChunkDoc(f"{s}/{d}", d, "locomo", s, "memory", text, vectors[i], source_type="memory", created_at=when)
            for i, (s, d, text, when) in enumerate(turns)
        ],
    )
    embedder = local.container.embedder
    assert embedder is not None
    questions = []
    for s in samples:
        known = {d for (sid, d, _, _) in turns if sid == s["sample_id"]}
        for qa in s["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = {e for ref in qa.get("evidence", []) for e in _SPLIT.split(ref) if e in known}
            if evidence:
                questions.append((s["sample_id"], str(qa["question"]), evidence))
    print(f"  locomo: {len(turns)} turns, {len(questions)} questions (categories 1-4)", flush=True)

    def service(**kw: Any) -> Callable[[str, str], list[str]]:
        def run(sample: str, q: str) -> list[str]:
            d = local.query(
                database="locomo", collection=sample, type="memory", query=q, max_results=10, graph_context=False, **kw
            )
            return dedup(c["id"] for c in d["chunks"])

        return run

    def flt(sample: str) -> SearchFilter:
        return SearchFilter(database="locomo", collections=[sample], store="memory")

    systems: dict[str, Callable[[str, str], list[str]]] = {
        "bm25 (FTS5 alone)": lambda s, q: [h.item_id for h in local.index.keyword_search(org, flt(s), q, limit=10)],
        "embedding alone": lambda s, q: [
            h.item_id for h in local.index.vector_search(org, flt(s), embedder.embed_query(q), limit=10)
        ],
        "text": service(query_by="text", mode="fast"),
        "fast": service(mode="fast"),
        "thinking": service(mode="thinking"),
        "auto": service(mode="auto"),
    }
    out: dict[str, Any] = {"turns": len(turns), "questions": len(questions), "recall@5": {}, "recall@10": {}}
    for name, run in systems.items():
        r5, r10 = [], []
        for sample, q, evidence in questions:
            ranked = run(sample, q)
            r5.append(len(evidence & set(ranked[:5])) / len(evidence))
            r10.append(len(evidence & set(ranked[:10])) / len(evidence))
        out["recall@5"][name] = round(statistics.fmean(r5), 4)
        out["recall@10"][name] = round(statistics.fmean(r10), 4)
        print(f"  locomo {name:<20} R@5 {out['recall@5'][name]:.4f}  R@10 {out['recall@10'][name]:.4f}", flush=True)
    return out


# ---- HTTP latency --------------------------------------------------------------------------------


def build_latency_corpus(data_dir: Path, sizes: list[int]) -> str:
    """One database per size: SciFact documents, then chunks of 3 random SciFact sentences. Returns the key."""
    local = Local(data_dir)
    try:
        corpus = load_jsonl(SCIFACT / "corpus.jsonl")
        embedder = local.container.embedder
        assert embedder is not None
        name = embedder.model_id.replace("/", "__")
        # baselines.py's cache, else the quality run's (same texts; written by embed_cached).
        cached = [CACHE / f"scifact-{name}-256.npy", CACHE / f"scifact-{name}.npy"]
        base = np.load(next((p for p in cached if p.exists()), cached[-1])).astype(np.float32)
        sentences = [s for d in corpus for s in re.split(r"(?<=[.!?])\s+", d["text"]) if len(s) > 30]
        rng = np.random.default_rng(7)
        pyrng = random.Random(7)
        org = local.principal.org
        for size in sizes:
            name = f"lat{size // 1000}k"
            local.create_database(name)
            docs = [
                ChunkDoc(
                    f"{d['_id']}#0",
                    d["_id"],
                    name,
                    "",
                    "knowledge",
                    d["text"],
                    base[i],
                    title=d.get("title", ""),
                    source_type="file",
                )
                for i, d in enumerate(corpus[:size])
            ]
            for j in range(len(docs), size):
                v = base[j % len(base)] + rng.normal(0, 0.05, base.shape[1]).astype(np.float32)
                docs.append(
                    ChunkDoc(
                        f"syn{j}#0",
                        f"syn{j}",
                        name,
                        "",
                        "knowledge",
                        " ".join(pyrng.sample(sentences, 3)),
                        (v / np.linalg.norm(v)).astype(np.float32),
                        title=f"Synthetic {j}",
                        source_type="file",
                    )
                )
            upsert(local.index, org, docs, batch=2000)
            print(f"  latency corpus {name}: {local.index.count(org, name, 'knowledge')} chunks", flush=True)
        return local.key
    finally:
        local.close()


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values) * 1000.0, q)), 1)


def latency(quick: bool) -> dict[str, Any]:
    sizes = [10_000, 100_000]
    queries = [q["text"] for q in load_jsonl(SCIFACT / "queries.jsonl")]
    random.Random(11).shuffle(queries)
    per = 60 if quick else 150
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        local_key = build_latency_corpus(data_dir, sizes)
        server = ServerProcess(data_dir)
        try:
            server.wait_ready(120)
            with server.client(local_key) as client:
                # Warm the model and the vector caches (one query per database), not timed.
                for size in sizes:
                    _post(client, f"lat{size // 1000}k", "warm up the caches", "fast")
                cursor = 0
                for size in sizes:
                    for mode in ("fast", "thinking"):
                        n = per if mode == "fast" else per // 2
                        batch, cursor = queries[cursor : cursor + n], cursor + n
                        times = [_post(client, f"lat{size // 1000}k", q, mode) for q in batch]
                        key_name = f"{mode}@{size // 1000}k"
                        out[key_name] = {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95), "n": len(times)}
                        print(
                            f"  http {key_name:<14} p50 {out[key_name]['p50_ms']} ms  p95 {out[key_name]['p95_ms']} ms",
                            flush=True,
                        )
                n = 200 if quick else 400
                batch, cursor = queries[cursor : cursor + n], cursor + n
                out["fast@100k x8 clients"] = _concurrent(server, local_key, "lat100k", batch, 8)
                print(f"  http fast@100k, 8 clients: {out['fast@100k x8 clients']['queries_per_s']} q/s", flush=True)
        finally:
            server.stop()
    return out


def _post(client: httpx.Client, database: str, query: str, mode: str) -> float:
    start = time.perf_counter()
    r = client.post("/query", json={"database": database, "query": query, "mode": mode, "max_results": 10})
    elapsed = time.perf_counter() - start
    if r.status_code != 200:
        raise RuntimeError(f"query failed: {r.status_code} {r.text[:300]}")
    return elapsed


def _concurrent(server: ServerProcess, key: str, database: str, queries: list[str], clients: int) -> dict[str, Any]:
    times: list[float] = []
    lock = threading.Lock()
    work = list(queries)

    def worker() -> None:
        with server.client(key) as client:
            while True:
                with lock:
                    if not work:
                        return
                    q = work.pop()
                t = _post(client, database, q, "fast")
                with lock:
                    times.append(t)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {
        "queries_per_s": round(len(times) / wall, 1),
        "p50_ms": pct(times, 50),
        "p95_ms": pct(times, 95),
        "n": len(times),
        "clients": clients,
    }


# ---- report --------------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    lines = []
    q = result.get("quality", {})
    sf, lc = q.get("scifact"), q.get("locomo")
    if sf or lc:
        lines += ["| system | SciFact nDCG@10 | LoCoMo R@5 | LoCoMo R@10 |", "|---|---|---|---|"]
        names = list((sf or {}).get("ndcg@10", {})) + [
            n for n in (lc or {}).get("recall@5", {}) if n not in (sf or {}).get("ndcg@10", {})
        ]
        for n in names:
            a = f"{sf['ndcg@10'][n]:.3f}" if sf and n in sf["ndcg@10"] else "-"
            b = f"{lc['recall@5'][n]:.3f}" if lc and n in lc["recall@5"] else "-"
            c = f"{lc['recall@10'][n]:.3f}" if lc and n in lc["recall@10"] else "-"
            lines.append(f"| {n} | {a} | {b} | {c} |")
    lat = result.get("latency")
    if lat:
        lines += ["", "| HTTP POST /query | p50 ms | p95 ms | n |", "|---|---|---|---|"]
        for name, v in lat.items():
            extra = f" ({v['queries_per_s']} q/s)" if "queries_per_s" in v else ""
            lines.append(f"| {name}{extra} | {v['p50_ms']} | {v['p95_ms']} | {v['n']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="100 SciFact queries, 2 LoCoMo conversations, fewer requests"
    )
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument(
        "--latency-only",
        action="store_true",
        help="only the HTTP latency part (= --skip-quality); the previous quality section is kept in the JSON",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.skip_quality = args.skip_quality or args.latency_only
    result: dict[str, Any] = {
        "quick": args.quick,
        "embedding_model": f"sentence-transformers/all-MiniLM-L6-v2 {Settings().embedding.precision} (onnxruntime)",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_at_start": os.getloadavg()},
    }
    t0 = time.perf_counter()
    if not args.skip_quality:
        with tempfile.TemporaryDirectory() as tmp:
            local = Local(Path(tmp) / "data")
            try:
                print("SciFact (BEIR test split)", flush=True)
                result.setdefault("quality", {})["scifact"] = scifact(local, args.quick)
                print("LoCoMo (categories 1-4, evidence turns)", flush=True)
                result["quality"]["locomo"] = locomo(local, args.quick)
            finally:
                local.close()
    if not args.skip_latency:
        print("HTTP latency (ctxstore serve subprocess, loopback)", flush=True)
        result["latency"] = latency(args.quick)
    if (args.skip_quality or args.skip_latency) and args.out.exists():
        # A partial run keeps the other half of the previous results (marked as such).
        previous = json.loads(args.out.read_text(encoding="utf-8"))
        for part in ("quality", "latency"):
            if part not in result and part in previous:
                result[part] = previous[part]
                result.setdefault("kept_from_previous_run", []).append(part)
    result["elapsed_s"] = round(time.perf_counter() - t0, 1)
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print()
    print(table(result))
    print(f"\nwrote {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}")


if __name__ == "__main__":
    main()
