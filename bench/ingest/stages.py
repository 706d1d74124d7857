"""Per-chunk cost of ingestion's two compute stages, in-process: `uv run python -m bench.ingest.stages`.

The same 1,000 plain-text items as `bench.ingest.run` (2,000 chunks) go through the pipeline's own
chunker, then through each stage alone: MiniLM embedding at float32 (batches of 32) and int8 (one text
per call), and spaCy extraction one chunk at a time and as one batch per item (what the graph step does).
Each stage runs twice and the faster pass counts (the cores are shared). The ceiling line is what
two cores can do if nothing but these stages ran: embedding uses both cores, extraction one.
Writes bench/results/ingest_stages.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.ingest.run import _text
from ctxstore.adapters.models.local_embedder import LocalEmbedder
from ctxstore.adapters.models.spacy_extractor import SpacyExtractor
from ctxstore.domain.chunking import chunk_markdown, embedding_input

ROOT = Path(__file__).resolve().parents[2]


def _rate(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    args = ap.parse_args()
    items = [(f"p{i}", chunk_markdown(f"p{i}", _text(i))) for i in range(args.items)]
    inputs = [embedding_input(f"Doc {item_id}", c) for item_id, chunks in items for c in chunks]
    n = len(inputs)
    fp32, int8 = LocalEmbedder(precision="fp32"), LocalEmbedder(precision="int8")
    extractor = SpacyExtractor()
    for warm in (fp32, int8):
        warm.embed_documents(inputs[:4])
    extractor.extract("Ada Lovelace joined Acme Corp.")
    rates = {
        "embed_fp32_batch32": _rate(n, lambda: fp32.embed_documents(inputs)),
        "embed_int8_one_per_call": _rate(n, lambda: int8.embed_documents(inputs)),
        "extract_one_per_call": _rate(n, lambda: [extractor.extract(c.text) for _, cs in items for c in cs]),
        "extract_batch_per_item": _rate(n, lambda: [extractor.extract_many([c.text for c in cs]) for _, cs in items]),
    }
    # Core-seconds per chunk: embedding keeps both cores busy, spaCy one.
    core_s = 2 / rates["embed_int8_one_per_call"] + 1 / rates["extract_batch_per_item"]
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
        "items": args.items,
        "chunks": n,
        "chunks_per_s": {k: round(v, 1) for k, v in rates.items()},
        "core_ms_per_chunk_int8_plus_batched_extraction": round(core_s * 1000, 1),
        "ceiling_chunks_per_s_on_2_cores": round(2 / core_s, 1),
    }
    out = ROOT / "bench" / "results" / "ingest_stages.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print("| stage | chunks/s |\n|---|---|")
    for k, v in result["chunks_per_s"].items():
        print(f"| {k} | {v} |")
    print(f"\nceiling on 2 cores (int8 + batched extraction): {result['ceiling_chunks_per_s_on_2_cores']} chunks/s")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
