"""One peer, one phase, in the peer's own venv: ingest a corpus, then run queries; JSON out.

    <venv>/bin/python peer_worker.py SYSTEM TASK.json OUT.json

SYSTEM: chroma | lancedb | txtai | mem0 | embedder. TASK (written by run.py):
  {"workdir": fresh dir, "docs": [[id, text], ...] or null for SciFact,
   "collections": {name: [[id, text], ...]} (LoCoMo: one collection per conversation),
   "queries": [[qid, collection, text], ...], "warm": [text, ...], "precision": "int8"}
Every system gets the same texts and the same embedding function (peer_embed.MiniLM). Timings:
  ingest_s  from the first document handed to the system until all are searchable
  lat_ms    per query, in-process (query embedding included), after warm-up queries
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from peer_embed import MiniLM  # noqa: E402

BATCH = 100


def chroma(task, emb):
    import chromadb
    from chromadb.config import Settings

    class EF(chromadb.EmbeddingFunction):
        def __init__(self) -> None:
            pass

        def __call__(self, input):
            return [v for v in emb.embed(list(input))]

        @staticmethod
        def name() -> str:
            return "minilm-onnx-bench"

        def get_config(self):
            return {}

        @staticmethod
        def build_from_config(config):
            return EF()

    client = chromadb.PersistentClient(path=task["workdir"], settings=Settings(anonymized_telemetry=False))
    cols = {}

    def ingest(name, docs):
        col = client.create_collection(
            f"c_{name}" if name else "scifact", embedding_function=EF(), metadata={"hnsw:space": "cosine"}
        )
        for s in range(0, len(docs), BATCH):
            part = docs[s : s + BATCH]
            col.add(ids=[d[0] for d in part], documents=[d[1] for d in part])
        cols[name] = col

    def search(name, q):
        return cols[name].query(query_texts=[q], n_results=10, include=[])["ids"][0]

    return ingest, search, {"chromadb": chromadb.__version__, "mode": "vector only (HNSW, cosine)"}


def lancedb(task, emb):
    import lancedb as ldb
    import pyarrow as pa
    from lancedb.rerankers import RRFReranker

    db = ldb.connect(task["workdir"])
    tables = {}
    rrf = RRFReranker()

    def ingest(name, docs):
        schema = pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field("text", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), 384)),
            ]
        )
        tbl = db.create_table(f"c_{name}" if name else "scifact", schema=schema)
        for s in range(0, len(docs), BATCH):
            part = docs[s : s + BATCH]
            vecs = emb.embed([d[1] for d in part])
            tbl.add(
                pa.table(
                    {
                        "id": [d[0] for d in part],
                        "text": [d[1] for d in part],
                        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), 384),
                    },
                    schema=schema,
                )
            )
        tbl.create_fts_index("text", use_tantivy=False, replace=True)  # native (Rust) FTS, BM25
        tables[name] = tbl

    def search(name, q):
        qv = emb.embed_one(q)
        rows = (
            tables[name].search(query_type="hybrid").vector(qv).text(q).rerank(rrf).limit(10).select(["id"]).to_list()
        )
        return [r["id"] for r in rows]

    return (
        ingest,
        search,
        {"lancedb": ldb.__version__, "mode": "hybrid: native FTS (BM25) + exact vector (no ANN index), RRFReranker"},
    )


def txtai(task, emb):
    import txtai as tx
    from txtai import Embeddings

    stores = {}

    def ingest(name, docs):
        e = Embeddings(method="external", transform=lambda texts: emb.embed(list(texts)), hybrid=True, content=False)
        e.index((d[0], d[1], None) for d in docs)
        stores[name] = e

    def search(name, q):
        return [r[0] for r in stores[name].search(q, 10)]

    return (
        ingest,
        search,
        {
            "txtai": getattr(tx, "__version__", "?"),
            "mode": "Embeddings(hybrid=True): txtai BM25 + dense (faiss default), normalised sum",
        },
    )


def mem0(task, emb):
    os.environ.setdefault("OPENAI_API_KEY", "sk-unused-no-llm-call")
    os.environ["MEM0_DIR"] = str(Path(task["workdir"]) / ".mem0")
    import mem0 as m0
    from mem0 import Memory

    class Emb:
        config = None

        def embed(self, text, memory_action=None):
            return emb.embed_one(text).tolist()

    mems = {}

    def ingest(name, docs):
        cfg = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": f"c_{name}" if name else "scifact",
                    "embedding_model_dims": 384,
                    "path": str(Path(task["workdir"]) / f"qdrant_{name or 'scifact'}"),
                },
            },
            "history_db_path": str(Path(task["workdir"]) / f"history_{name or 'scifact'}.db"),
        }
        m = Memory.from_config(cfg)
        m.embedding_model = Emb()
        for doc_id, text in docs:
            m.add(text, user_id="bench", metadata={"doc_id": doc_id}, infer=False)
        mems[name] = m

    def search(name, q):
        res = mems[name].search(q, top_k=10, filters={"user_id": "bench"})  # default threshold 0.1
        return [r["metadata"]["doc_id"] for r in res["results"]]

    return (
        ingest,
        search,
        {
            "mem0ai": getattr(m0, "__version__", "?"),
            "mode": "Memory.add(infer=False), qdrant embedded (path), search() default",
        },
    )


def version(dist: str) -> str:
    from importlib.metadata import version as v

    return v(dist)


def main() -> None:
    system, task_path, out_path = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    task = json.loads(task_path.read_text())
    t0 = time.perf_counter()
    emb = MiniLM(task.get("precision", "int8"), threads=2)
    load_s = time.perf_counter() - t0
    out: dict = {"system": system, "precision": emb.precision, "model_load_s": round(load_s, 3)}

    if system == "embedder":  # the physical reference: bare embedding throughput on the same texts
        texts = [d[1] for d in task["docs"]]
        for prec in task.get("precisions", ["int8"]):
            e = emb if prec == emb.precision else MiniLM(prec, threads=2)
            t = time.perf_counter()
            vecs = e.embed(texts)
            dt = time.perf_counter() - t
            import numpy as np

            np.save(Path(task["workdir"]) / f"vectors_{prec}.npy", vecs)
            out[prec] = {"texts": len(texts), "seconds": round(dt, 2), "texts_per_s": round(len(texts) / dt, 1)}
            qs = task.get("queries") or []
            if qs:
                qv = e.embed([q[2] for q in qs])
                sims = qv @ vecs.T
                ids = [d[0] for d in task["docs"]]
                out[prec]["runs"] = {q[0]: [ids[j] for j in (-sims[i]).argsort()[:10]] for i, q in enumerate(qs)}
        out_path.write_text(json.dumps(out))
        return

    ingest, search, info = {"chroma": chroma, "lancedb": lancedb, "txtai": txtai, "mem0": mem0}[system](task, emb)
    out["info"] = info | {
        "version": version({"chroma": "chromadb", "mem0": "mem0ai"}.get(system, system)),
        "onnxruntime": version("onnxruntime"),
    }
    cols = task.get("collections") or {"": task["docs"]}
    n = sum(len(v) for v in cols.values())
    t = time.perf_counter()
    for name, docs in cols.items():
        ingest(name, docs)
    out["ingest_s"] = round(time.perf_counter() - t, 3)
    out["docs"] = n
    first = next(iter(cols))
    for w in task.get("warm", []):
        search(first, w)
    runs, lat = {}, []
    for qid, col, text in task["queries"]:
        t = time.perf_counter()
        runs[qid] = search(col, text)
        lat.append((time.perf_counter() - t) * 1000)
    out["runs"] = runs
    out["lat_ms"] = [round(x, 3) for x in lat]
    out_path.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
