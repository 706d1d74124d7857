"""The graph step's writes for the collections small_scopes.py writes straight into the index (issue 28 goal 7).

Ingested through the API, every item gets a node in its collection's graph even with the extractor off (the item
graph: a `Source` per item, GraphService.write_many), so each collection a query answers from has a graph to read.
The straight-written collections had none, and a read of a graph that does not exist costs the embedded engine
two round trips (its "empty key" error, then the same read of an always-empty graph) where an existing one costs
one: the benchmark made graph context dearer than the API's data would. This writes what the graph step would, for
each collection that has no graph yet (resumable), through the service the pipeline calls.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from ctxstore.config import Settings
from ctxstore.domain.graph_keys import graph_name
from ctxstore.domain.items import KEY_SEP, ItemRef, item_record
from ctxstore.runtime.local import build_local
from ctxstore.services.graphs.graph_rows import GraphRows
from ctxstore.services.registry import build_services


def write_item_graphs(data: Path, org: str, database: str, collections: list[str], budget_s: float) -> dict[str, Any]:
    container = build_local(Settings(data_dir=data, extractor="none"))
    graphs = build_services(container).graphs
    assert graphs is not None
    have = set(container.graph.list_graphs(org, f"ctx:knowledge:{database}:"))
    todo = [c for c in collections if graph_name("knowledge", database, c) not in have]
    rec = sqlite3.connect(data / "records.db")
    t0, done = time.perf_counter(), 0
    try:
        for coll in todo:
            if time.perf_counter() - t0 > budget_s:
                break
            pk = KEY_SEP.join((database, coll, "knowledge"))
            rows = rec.execute("SELECT sk, body FROM records WHERE org=? AND kind='item' AND pk=?", (org, pk))
            items = [
                (ItemRef(database, coll, "knowledge", str(sk)), item_record(json.loads(body)), GraphRows([], []))
                for sk, body in rows
            ]
            graphs.write_many(org, items)
            done += 1
            if done % 100 == 0:
                print(f"  item graphs: {done} of {len(todo)} collections", flush=True)
    finally:
        rec.close()
        container.close()
    return {"graph_collections": done, "graph_write_s": round(time.perf_counter() - t0, 1), "graphs_before": len(have)}
