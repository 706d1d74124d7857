"""Many small scopes (issue 28 goal 7): 1,000 collections of 1,000 chunks in one database, over HTTP.

    uv run python -m bench.retrieval.small_scopes build --collections 100    # then 1000 (resumes)
    uv run python -m bench.retrieval.small_scopes measure

Diagnostic in part (labelled in the results): the work dir starts as a copy of the 100k data dir that
api_latency.py ingested through the API (database `lat`, one collection: the same-run reference). A new
database `scopes` gets `--api-collections` collections of 1,000 notes ingested through `POST
/context/ingest`; every other collection is written straight into the index (SqliteSearchIndex.upsert, the
pipeline's index call) with its item records (the records table, as ingestion leaves them: status
completed, same version as the chunks, so the query's liveness check keeps them) and the item graph the graph step
writes for them (small_scopes_graphs.py): each chunk is an
API-ingested `lat` chunk's text with that chunk's real vector plus Gaussian noise (sigma 1/sqrt(dim) per
component before normalising, cosine ~0.71 to its source), as latency_1m.py grows its corpus.

`measure` starts one `ctxstore serve` (extractor off, graph context on as by default) and times, with one
keep-alive client: the reference (`lat`, 100k chunks in one collection), the first query into `scopes`
(loads its vectors), one query into each collection in turn (cold: the collection's first query) with the
server's RSS after touching 1, 100 and every collection, queries into already-touched collections (warm),
and queries into 100 collections with the spec's relative weights. Writes bench/results/small_scopes.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench.api_client import REPO, Api, SciFact, load, pct, read_jsonl
from bench.retrieval.small_scopes_graphs import write_item_graphs

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.domain.items import KEY_SEP
from ctxstore.ports.search_index import ChunkDoc

OUT = REPO / "bench" / "results" / "small_scopes.json"
DB = "scopes"
FIRST_S = 8.0  # the first 100-collection queries: at least this long (the int8 copy's build)
PER = 1000
ORG = "default"


def _rss_mb(pid: int) -> dict[str, float]:
    """Resident memory, split: RssFile is the memory-mapped vector snapshot's pages (clean, reclaimable)."""
    keys = ("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:")
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(keys):
            out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return out


def coll_name(i: int) -> str:
    return f"c{i:04d}"


def _api_items(sf: SciFact, coll: int) -> list[dict[str, Any]]:
    """1,000 notes of three SciFact sentences each, distinct per collection."""
    import re

    sentences = [s for d in sf.docs for s in re.split(r"(?<=[.!?])\s+", d["text"]) if len(s) > 30]
    rng = random.Random(1000 + coll)
    return [
        {
            "id": f"n{coll}-{j}",
            "title": f"Note {coll}-{j}",
            "type": "note",
            "content": {"text": " ".join(rng.sample(sentences, 3))},
        }
        for j in range(PER)
    ]


def _have(data: Path) -> set[str]:
    conn = sqlite3.connect(data / "search.db")
    try:
        rows = conn.execute("SELECT collection FROM kw_scopes WHERE database=? AND docs >= ?", (DB, PER)).fetchall()
    finally:
        conn.close()
    return {str(r[0]) for r in rows}


def _template(data: Path) -> dict[str, Any]:
    conn = sqlite3.connect(data / "records.db")
    try:
        (body,) = conn.execute(
            "SELECT body FROM records WHERE kind='item' AND pk LIKE ? LIMIT 1", (f"{DB}%",)
        ).fetchone()
    finally:
        conn.close()
    out: dict[str, Any] = json.loads(body)
    return out


def _sources(data: Path) -> tuple[list[tuple[str, str]], np.ndarray]:
    conn = sqlite3.connect(data / "search.db")
    try:
        rows = conn.execute(
            "SELECT title, text, vector FROM chunks WHERE database='lat' AND vector IS NOT NULL"
        ).fetchall()
    finally:
        conn.close()
    texts = [(str(t), str(x)) for t, x, _ in rows]
    return texts, np.stack([np.frombuffer(v, dtype=np.float32) for _, _, v in rows])


def _grow(data: Path, target: int, budget_s: float) -> dict[str, Any]:
    """Write collections straight into the index and their item records until `target` or `budget_s`."""
    have = _have(data)
    todo = [i for i in range(target) if coll_name(i) not in have]
    if not todo:
        return {"written_collections": 0}
    template = _template(data)
    texts, vecs = _sources(data)
    idx = SqliteSearchIndex(data / "search.db")
    rec = sqlite3.connect(data / "records.db")
    t0 = time.perf_counter()
    done = 0
    try:
        for i in todo:
            if time.perf_counter() - t0 > budget_s:
                break
            coll = coll_name(i)
            nrng = np.random.default_rng(i)
            picks = nrng.integers(0, len(texts), size=PER)
            noisy = vecs[picks] + nrng.normal(0.0, 1.0 / np.sqrt(vecs.shape[1]), size=(PER, vecs.shape[1]))
            noisy = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)
            now = time.time()
            docs, records = [], []
            for j in range(PER):
                item = f"d{i}-{j}"
                version = f"0{int(now * 1e9):020d}-{i:04d}{j:04d}"
                title, text = texts[int(picks[j])]
                docs.append(
                    ChunkDoc(
                        f"{item}#0",
                        item,
                        DB,
                        coll,
                        "knowledge",
                        text,
                        noisy[j],
                        title=title,
                        created_at=now,
                        version=version,
                    )
                )
                body = {
                    **template,
                    "id": item,
                    "title": title,
                    "version": version,
                    "blob_key": f"{DB}/{coll}/knowledge/{item}/{version}",
                    "collection": coll,
                    "created_at": now,
                    "updated_at": now,
                    "timestamp": now,
                }
                pk = KEY_SEP.join((DB, coll, "knowledge"))
                records.append((ORG, "item", pk, item, 1, None, json.dumps(body, separators=(",", ":"))))
            with rec:
                rec.executemany("INSERT OR REPLACE INTO records VALUES (?,?,?,?,?,?,?)", records)
                rec.execute(
                    "INSERT OR IGNORE INTO records VALUES (?,?,?,?,?,?,?)",
                    (ORG, "collection", DB, coll, 1, None, json.dumps({"created_at": now})),
                )
            idx.upsert(ORG, docs)
            done += 1
            if done % 50 == 0:
                print(
                    f"  {len(have) + done} collections, {done * PER / (time.perf_counter() - t0):.0f} rows/s",
                    flush=True,
                )
    finally:
        rec.close()
        idx.close()
    return {"written_collections": done, "write_s": round(time.perf_counter() - t0, 1)}


def build(args: argparse.Namespace) -> None:
    data = args.work / "data"
    info_path = args.work / "build.json"
    info: dict[str, Any] = json.loads(info_path.read_text()) if info_path.exists() else {}
    if not data.exists():
        shutil.copytree(args.source / "data", data, ignore=shutil.ignore_patterns("serve.lock"))
        info = {"key": json.loads((args.source / "progress.json").read_text())["key"], "api_collections": []}
    if len(info["api_collections"]) < args.api_collections:
        sf = SciFact.load()
        with Api(data, env={"CTXSTORE_EXTRACTOR": "none"}, key=info["key"]) as api:
            api.create_db(DB)
            for i in range(len(info["api_collections"]), args.api_collections):
                items = _api_items(sf, i)
                t0 = time.perf_counter()
                api.ingest_app(DB, items, collection=coll_name(i))
                waited = api.wait(DB, {coll_name(i): [it["id"] for it in items]}, t0, poll=2.0, until="searchable")
                info["api_collections"].append({"collection": coll_name(i), **waited, "load": load()})
                info_path.write_text(json.dumps(info, indent=2))
    grown = _grow(data, args.collections, args.budget_s)
    api_written = {c["collection"] for c in info["api_collections"]}
    straight = sorted(c for c in _have(data) if c not in api_written)
    grown.update(write_item_graphs(data, ORG, DB, straight, args.budget_s))
    info.setdefault("grow_runs", []).append({**grown, "target": args.collections, "load": load()})
    info["collections"] = len(_have(data))
    info_path.write_text(json.dumps(info, indent=2))
    print(json.dumps({k: v for k, v in info.items() if k != "key"}), flush=True)


# ---- measure -------------------------------------------------------------------------------------


def _timed(api: Api, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    raw = []
    for body in bodies:
        dt, data = api.query(body)
        raw.append({"ms": dt, "empty": not data["chunks"]})
    return {**_summary(raw), "raw": raw}


def _summary(raw: list[dict[str, Any]]) -> dict[str, Any]:
    lat = [r["ms"] for r in raw]
    return {
        "p50_ms": pct(lat, 50),
        "p95_ms": pct(lat, 95),
        "n": len(lat),
        "empty_answers": sum(r["empty"] for r in raw),
    }


def _weights(rng: random.Random, names: list[str]) -> dict[str, float]:
    return {c: rng.randint(1, 10) / 10 for c in rng.sample(names, 100)}


def _merge_keywords(search_db: Path) -> dict[str, Any]:
    """What `serve` does once the index is idle (keyword_merge.py), done before the server starts so that it
    does not run beside the timed queries: merge the keyword index's segments into one."""
    from ctxstore.adapters.local.keyword_merge import segment_count

    idx = SqliteSearchIndex(search_db)
    try:
        before = segment_count(idx._db)
        idx.keyword_merger.idle_s, idx.keyword_merger.min_new_rows, idx.keyword_merger.min_segments = 0, 0, 2
        t0 = time.perf_counter()
        steps = idx.merge_keyword_segments()
        out = {"segments_before": before, "segments_after": segment_count(idx._db), "steps": steps}
        out["merge_s"] = round(time.perf_counter() - t0, 1)
        out["load"] = load()
    finally:
        idx.close()
    print(f"keyword merge: {out}", flush=True)
    return out


def measure(args: argparse.Namespace) -> None:
    data = args.work / "data"
    info = json.loads((args.work / "build.json").read_text())
    names = sorted(_have(data))
    claims = [q["text"] for q in read_jsonl(REPO.parent / "shared" / "data" / "beir_scifact" / "queries.jsonl")]
    rng = random.Random(args.seed)
    rng.shuffle(claims)

    cursor = [0]

    def take(n: int) -> list[str]:
        """The next n claims (cycling): each phase gets texts the earlier ones did not send."""
        n = max(2, round(n * args.scale))
        out = [claims[(cursor[0] + i) % len(claims)] for i in range(n)]
        cursor[0] += n
        return out

    res: dict[str, Any] = {
        "diagnostic": "collections beyond the API-ingested ones written straight into the index (see docstring)",
        "collections": len(names),
        "chunks_per_collection": PER,
        "api_collections": [c["collection"] for c in info["api_collections"]],
        "load_before": load(),
    }
    fast = {"mode": "fast", "max_results": 10}
    thinking = {"mode": "thinking", "max_results": 10}
    # The HNSW lane off: the `scopes` database is one 1M-row vector scope, so at the default threshold the server
    # builds its index in the background during the run (a core taken from the queries; a 100-collection query,
    # at most 100k allowed rows, never reaches the index anyway).
    env = {"CTXSTORE_EXTRACTOR": "none", "CTXSTORE_VECTOR_ANN_MIN_ROWS": "0"}
    if args.merge_keywords:
        res["keyword_merge"] = _merge_keywords(data / "search.db")
    else:  # the index as it stands: no merge while the queries run (serve merges an idle index)
        env["CTXSTORE_KEYWORD_MERGE_S"] = "0"
    code = args.server_code or REPO
    if args.server_code is not None:  # e.g. the main checkout before a change: its package shadows this one's
        env["PYTHONPATH"] = str(args.server_code / "layers" / "core")
    res["server_code"] = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=code, capture_output=True, text=True
    ).stdout.strip()
    with Api(data, env=env, key=info["key"]) as api:
        pid = api.server.proc.pid
        res["rss_mb_start"] = _rss_mb(pid)
        api.query({"database": "lat", "query": "warm up the caches", **fast})
        res["reference_100k_one_collection"] = {
            "fast": _timed(api, [{"database": "lat", "query": t, **fast} for t in take(150)]),
            "thinking": _timed(api, [{"database": "lat", "query": t, **thinking} for t in take(50)]),
            "rss_mb": _rss_mb(pid),
        }
        t0 = time.perf_counter()
        api.query({"database": DB, "collection": names[0], "query": "load the scope", **fast})
        res["first_query_into_scopes_s"] = round(time.perf_counter() - t0, 2)
        res["rss_mb_after_touching"] = {"1": _rss_mb(pid)}
        order = names[1:]
        rng.shuffle(order)
        lat = []
        for i, (coll, text) in enumerate(
            zip(order, [claims[j % len(claims)] for j in range(len(order))], strict=True), start=2
        ):
            dt, _ = api.query({"database": DB, "collection": coll, "query": text, **fast})
            lat.append(dt)
            if i in (10, 100, 300) or i == len(names):
                res["rss_mb_after_touching"][str(i)] = _rss_mb(pid)
        res["one_collection_cold_fast"] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "n": len(lat)}
        warm = order[:20]
        res["one_collection_warm"] = {
            mode["mode"]: _timed(
                api, [{"database": DB, "collection": warm[i % 20], "query": t, **mode} for i, t in enumerate(take(n))]
            )
            for mode, n in ((fast, 150), (thinking, 50))
        }
        # The first shortlists past pread's size start the int8 copy of the 1M scope's rows (2.4 s in the background
        # on an idle machine, quantized_rows.py): its queries are reported apart from the warm ones, for at least
        # FIRST_S (60 queries ended inside the build once queries got faster: the warm p95 caught its tail).
        # Their own texts and weights, so the phases after them get the same ones however many ran.
        first: list[dict[str, Any]] = []
        first_texts, first_rng, started = take(60), random.Random(args.seed + 1), time.perf_counter()
        while len(first) < 60 or time.perf_counter() - started < FIRST_S * args.scale:
            text = first_texts[len(first) % len(first_texts)]
            body = {"database": DB, "collections": _weights(first_rng, names), "query": text, **fast}
            first += _timed(api, [body])["raw"]
        res["hundred_weighted_first"] = _summary(first)
        res["rss_mb_after_first_hundred"] = _rss_mb(pid)
        res["hundred_weighted_collections"] = {
            mode["mode"]: _timed(
                api, [{"database": DB, "collections": _weights(rng, names), "query": t, **mode} for t in take(n)]
            )
            for mode, n in ((fast, 100), (thinking, 50))
        }
        res["reference_100k_one_collection_again"] = {
            "fast": _timed(api, [{"database": "lat", "query": t, **fast} for t in take(100)])
        }
        res["rss_mb_end"] = _rss_mb(pid)
        res["load_after"] = load()
        args.out.write_text(json.dumps(res, indent=2) + "\n")
        print(json.dumps(res), flush=True)
        api.server.stop(timeout=600)  # a clean stop saves the 1M scope's vectors (1.5 GB): longer than 20 s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("build", "measure"))
    ap.add_argument("--source", type=Path, default=Path("/work/benchdata/r100k"))
    ap.add_argument("--work", type=Path, default=Path("/work/benchdata/ss-scopes"))
    ap.add_argument("--collections", type=int, default=1000)
    ap.add_argument("--api-collections", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=540.0, help="stop growing after this long (resume later)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="query counts times this (0.1: a smoke run)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--merge-keywords",
        action="store_true",
        help="merge the keyword index first (as serve does when idle)",
    )
    ap.add_argument("--server-code", type=Path, help="serve with the package of this checkout (a before run)")
    args = ap.parse_args()
    build(args) if args.phase == "build" else measure(args)


if __name__ == "__main__":
    main()
