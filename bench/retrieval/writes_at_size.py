"""Writes at size (issue 28 goal 5), diagnostic: ingest rate into an index at ~1M chunks against an empty one,
and deletes and re-ingests seen by the next query.

    uv run python -m bench.retrieval.writes_at_size --big /work/benchdata/ss-scopes [--items 1000]

In one session, twice: a fresh data dir, then the big data dir (a copy built by small_scopes.py: 1M chunks
in 1,000 collections plus the 100k `lat` corpus; its vectors loaded by a query first, as a serving node has
them). Each gets the same `--items` notes (three SciFact sentences and a unique token each) through `POST
/context/ingest` in requests of 100 into a new collection, timed until every one is searchable; the big run
goes into the 1M-chunk database, so its vector scope and keyword tables take the writes at size. Then, on
the big dir, for `--probes` of those items: DELETE /context, and the very next keyword query for the item's
token must not return it; re-ingest it with a new token, wait until searchable, and the next query for the
new token must return it and the old token nothing. Writes bench/results/writes_at_size.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.api_client import REPO, Api, SciFact, load
from bench.retrieval.api_latency import _rss_mb

OUT = REPO / "bench" / "results" / "writes_at_size.json"
BIG_DB = "scopes"


def _notes(n: int, tag: str) -> list[dict[str, Any]]:
    import random

    sf = SciFact.load()
    sentences = [s for d in sf.docs for s in re.split(r"(?<=[.!?])\s+", d["text"]) if len(s) > 30]
    rng = random.Random(77)
    return [
        {
            "id": f"w{i}",
            "title": f"Write {i}",
            "type": "note",
            "content": {"text": " ".join(rng.sample(sentences, 3)) + f" zq{tag}{i}tok"},
        }
        for i in range(n)
    ]


def _ingest_timed(api: Api, db: str, coll: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    res: dict[str, Any] = {"load_before": load()}
    t0 = time.perf_counter()
    api.ingest_app(db, items, collection=coll)
    res.update(api.wait(db, {coll: [it["id"] for it in items]}, t0, poll=0.5, until="searchable"))
    res["items_per_s_searchable"] = round(len(items) / res["searchable_s"], 2)
    res["load_after"] = load()
    return res


def _ids_for(api: Api, db: str, coll: str, token: str) -> list[str]:
    body = {"database": db, "collection": coll, "query": token, "mode": "fast", "query_by": "text", "max_results": 10}
    _, data = api.query(body)
    return [str(c["id"]) for c in data["chunks"]]


def _probe(api: Api, db: str, coll: str, items: list[dict[str, Any]], n: int) -> dict[str, float]:
    """Delete, query; re-ingest with a new token, wait, query: what the next query sees each time."""
    still_found = missing = old_found = 0
    waits: list[float] = []
    for it in items[:n]:
        old = it["content"]["text"].rsplit(" ", 1)[1]
        assert it["id"] in _ids_for(api, db, coll, old), it["id"]  # found before
        r = api.http.request("DELETE", "/context", json={"database": db, "collection": coll, "ids": [it["id"]]})
        assert r.status_code == 200, r.text
        still_found += it["id"] in _ids_for(api, db, coll, old)
        new_token = old.replace("tok", "new")
        again = {**it, "content": {"text": it["content"]["text"].rsplit(" ", 1)[0] + f" {new_token}"}}
        t0 = time.perf_counter()
        api.ingest_app(db, [again], collection=coll)
        api.wait(db, {coll: [it["id"]]}, t0, poll=0.05, until="searchable")
        waits.append(round(time.perf_counter() - t0, 2))
        missing += it["id"] not in _ids_for(api, db, coll, new_token)
        old_found += it["id"] in _ids_for(api, db, coll, old)
    out: dict[str, float] = {"probes": n, "deleted_still_found": still_found, "reingested_missing": missing}
    out |= {"old_token_found": old_found, "reingest_to_searchable_s_median": sorted(waits)[len(waits) // 2]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big", type=Path, default=Path("/work/benchdata/ss-scopes"))
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--database", default=BIG_DB, help="of the big dir: `lat` for latency_1m.py's (one 1M scope)")
    ap.add_argument("--server-code", type=Path, help="serve with the package of this checkout (a before run)")
    args = ap.parse_args()
    env = {"CTXSTORE_EXTRACTOR": "none"}
    if args.server_code is not None:  # its package shadows this checkout's
        env["PYTHONPATH"] = str(args.server_code / "layers" / "core")
    built = args.big / "build.json"  # small_scopes.py's dir; latency_1m.py's keeps its key in progress.json
    info = json.loads((built if built.exists() else args.big / "progress.json").read_text())
    res: dict[str, Any] = {
        "diagnostic": "big data dir grown by small_scopes.py or latency_1m.py (rows written straight into the index)",
        "big_dir": str(args.big),
        "database": args.database,
        "server_code": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=args.server_code or REPO, capture_output=True, text=True
        ).stdout.strip(),
    }
    with tempfile.TemporaryDirectory(dir=args.big.parent) as tmp, Api(Path(tmp) / "data", env=env) as api:
        api.create_db("w")
        api.ingest_app("w", [{"id": "warm", "title": "Warm", "type": "note", "content": {"text": "Cells."}}])
        api.wait("w", {None: ["warm"]}, time.perf_counter(), poll=0.2, until="searchable")
        res["empty"] = _ingest_timed(api, "w", "writes", _notes(args.items, "e"))
        res["empty"]["rss_mb"] = _rss_mb(api.server.proc.pid)  # the ingest's own memory, without the 1M index
    conn = sqlite3.connect(args.big / "data" / "search.db")
    res["big_chunks_before"] = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    conn.close()
    tag = f"b{int(time.time())}"  # a collection of its own each run: the big dir keeps earlier runs' writes
    with Api(args.big / "data", env=env, key=info["key"]) as api:
        t0 = time.perf_counter()
        api.query({"database": args.database, "query": "load the vectors", "mode": "fast", "max_results": 10})
        res["big_first_query_s"] = round(time.perf_counter() - t0, 1)
        items = _notes(args.items, tag)
        res["big"] = _ingest_timed(api, args.database, tag, items)
        res["big"]["rss_mb"] = _rss_mb(api.server.proc.pid)
        res["ratio_big_to_empty"] = round(
            res["big"]["items_per_s_searchable"] / res["empty"]["items_per_s_searchable"], 3
        )
        res["delete_reingest"] = _probe(api, args.database, tag, items, args.probes)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
        print(json.dumps(res), flush=True)
        api.server.stop(timeout=600)  # a clean stop saves the 1M scope's vectors (1.5 GB): longer than 20 s


if __name__ == "__main__":
    main()
