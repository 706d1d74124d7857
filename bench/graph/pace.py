"""Diagnostic (in-process, not over HTTP): where a graph job's time goes, one job at a time against batches.

    uv run python -m bench.graph.pace [--docs 256] [--batch 32]

The same SciFact abstracts are ingested into two databases of one local app (the server's ports: SQLite,
FalkorDB, spaCy in its nice-10 process) and made searchable; then the graph queue of one database is run
one job at a time and the other's in batches (pipeline/graph_batches.py), each timed. Alongside, the parts
of a graph job alone: spaCy per text (`nlp()`) and batched (`nlp.pipe`), the hop to the extraction process,
and the graph and status writes of one item and of a batch. Writes bench/results/graph_pace.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.support.app import LocalApp, make_app

from bench.api_client import SciFact
from ctxstore.adapters.models.spacy_extractor import SpacyExtractor, load_pipeline
from ctxstore.pipeline.jobs import GRAPH_QUEUE, queue_specs
from ctxstore.pipeline.local_runner import LocalRunner

HERE = Path(__file__).parent
RESULTS = HERE.parent / "results" / "graph_pace.json"


def _ingest(app: LocalApp, database: str, items: list[dict[str, Any]]) -> None:
    app.create_ready_database(database)
    for start in range(0, len(items), 100):
        body = {"database": database, "app_knowledge": json.dumps(items[start : start + 100])}
        r = app.client.post("/context/ingest", data=body, headers=app.headers())
        assert r.status_code == 202, r.text


def _timed_drain(runner: LocalRunner) -> float:
    t = time.perf_counter()
    runner.drain(max_jobs=1_000_000)
    return time.perf_counter() - t


def _spacy(texts: list[str], batch: int) -> dict[str, Any]:
    nlp = load_pipeline()
    list(nlp.pipe(texts[:16]))
    t = time.perf_counter()
    for x in texts:
        nlp(x)
    one = time.perf_counter() - t
    t = time.perf_counter()
    list(nlp.pipe(texts, batch_size=batch))
    piped = time.perf_counter() - t
    ex = SpacyExtractor(processes=1)
    ex.extract_many(texts[:4])  # start and warm the process
    t = time.perf_counter()
    for x in texts:
        ex.extract_many([x])
    hop_one = time.perf_counter() - t
    t = time.perf_counter()
    for start in range(0, len(texts), batch):
        ex.extract_many(texts[start : start + batch])
    hop_batch = time.perf_counter() - t
    n = len(texts)
    return {
        "nlp_per_text_ms": round(one / n * 1000, 2),
        "nlp_pipe_per_text_ms": round(piped / n * 1000, 2),
        "extract_via_one_process_one_text_per_call_ms": round(hop_one / n * 1000, 2),
        "extract_via_one_process_batches_per_text_ms": round(hop_batch / n * 1000, 2),
        "pipeline": list(nlp.pipe_names),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    sf = SciFact.load(args.docs)
    items = sf.items()
    out: dict[str, Any] = {"docs": len(items), "batch": args.batch, "load_before": os.getloadavg()[0]}
    # The extraction pool is shared per process and sized by its first user: one process here, for both
    # the parts below and the app's graph queues (so the comparison is batching alone).
    out["spacy"] = _spacy(sf.texts(), args.batch)
    print(json.dumps(out["spacy"]), flush=True)
    with tempfile.TemporaryDirectory(prefix="graph-pace-") as tmp:
        app = make_app(Path(tmp) / "data")
        try:
            specs = queue_specs(app.services)
            index_only = LocalRunner(app.container.queue, [s for s in specs if s.name != GRAPH_QUEUE])
            singles = [replace(s, batch_handler=None, batch=1) if s.name == GRAPH_QUEUE else s for s in specs]
            batched = [replace(s, batch=args.batch) if s.name == GRAPH_QUEUE else s for s in specs]
            _ingest(app, "one", items)
            index_only.drain(max_jobs=1_000_000)
            one = _timed_drain(LocalRunner(app.container.queue, singles, threads=1))
            _ingest(app, "many", items)
            index_only.drain(max_jobs=1_000_000)
            many = _timed_drain(LocalRunner(app.container.queue, batched, threads=1))
        finally:
            app.close()
    n = len(items)
    out["graph_queue"] = {
        "one_job_at_a_time_s": round(one, 2),
        "batched_s": round(many, 2),
        "one_job_at_a_time_ms_per_item": round(one / n * 1000, 1),
        "batched_ms_per_item": round(many / n * 1000, 1),
        "speedup": round(one / many, 2),
    }
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out["graph_queue"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
