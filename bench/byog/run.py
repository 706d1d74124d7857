"""BYOG latency and write throughput: over HTTP (a real `ctxstore serve`) next to the same query sent
straight to the embedded engine on its unix socket.

    uv run python -m bench.byog.run [--nodes 100000] [--queries 1000] [--batch 1000]

Builds a graph of N `:P {i, name}` nodes (index on `i`) and 3 `:K` edges per node with batched
`UNWIND $rows AS r CREATE ...` through POST /byog/query, then times a 2-hop MATCH from a random
indexed node, and batched creates, both ways. "Added by the service" is HTTP p50 minus engine p50
(same machine, same graph, same parameters). Writes bench/results/byog.json and prints a table.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from falkordb import FalkorDB
from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
DB, COL = "bench", "g"
TWO_HOP = "MATCH (a:P {i: $i})-[:K]->()-[:K]->(c) RETURN c.i AS i, c.name AS name"
NODE_BATCH = "UNWIND $rows AS r CREATE (:P {i: r.i, name: r.name})"
EDGE_BATCH = "UNWIND $rows AS r MATCH (a:P {i: r.a}), (b:P {i: r.b}) CREATE (a)-[:K]->(b)"
WRITE_BATCH = "UNWIND $rows AS r CREATE (:W {i: r.i, name: r.name, tags: r.tags})"


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(xs, 50) * 1000, 3),
        "p95_ms": round(pct(xs, 95) * 1000, 3),
        "mean_ms": round(statistics.fmean(xs) * 1000, 3),
    }


class Http:
    """A keep-alive HTTP/1.1 connection with Python's http.client: the lightest client at hand (httpx spends
    ~0.5 ms of its own per request, which is the client's cost, not the service's)."""

    def __init__(self, port: int, key: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {key}", "API-Version": "2", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.conn.request("POST", path, body=json.dumps(body), headers=self.headers)
        r = self.conn.getresponse()
        return r.status, json.loads(r.read())


def http_query(c: Http, query: str, params: dict[str, Any]) -> Any:
    status, body = c.post("/byog/query", {"database": DB, "collection": COL, "query": query, "params": params})
    if status != 200:
        raise RuntimeError(body)
    return body["data"]


def build(c: Http, n: int, batch: int) -> dict[str, float]:
    http_query(c, "CREATE INDEX FOR (p:P) ON (p.i)", {})
    t0 = time.perf_counter()
    for s in range(0, n, batch):
        http_query(c, NODE_BATCH, {"rows": [{"i": i, "name": f"node-{i}"} for i in range(s, min(n, s + batch))]})
    nodes_s = time.perf_counter() - t0
    rng = random.Random(7)
    t0 = time.perf_counter()
    edges = [{"a": i, "b": rng.randrange(n)} for i in range(n) for _ in range(3)]
    for s in range(0, len(edges), batch):
        http_query(c, EDGE_BATCH, {"rows": edges[s : s + batch]})
    edges_s = time.perf_counter() - t0
    return {"nodes": n, "edges": len(edges), "node_load_s": round(nodes_s, 2), "edge_load_s": round(edges_s, 2)}


def engine_graph(data_dir: Path) -> Any:
    """The collection's graph on the engine's own socket (the org-prefixed key ctxstore gives it)."""
    pool = redis.ConnectionPool(
        connection_class=redis.UnixDomainSocketConnection,
        path=str(data_dir / "graph" / "falkordb.sock"),
        decode_responses=True,
    )
    db = FalkorDB(connection_pool=pool)
    [key] = [g for g in db.list_graphs() if str(g).endswith(f"byog:{DB}:{COL}")]
    return db.select_graph(key)


def time_reads(run: Any, n: int, queries: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    for _ in range(50):  # warm-up
        run({"i": rng.randrange(n)})
    out = []
    for _ in range(queries):
        params = {"i": rng.randrange(n)}
        t0 = time.perf_counter()
        run(params)
        out.append(time.perf_counter() - t0)
    return out


def time_writes(run: Any, batches: int, batch: int, start: int) -> dict[str, float]:
    times = []
    for b in range(batches):
        rows = [
            {"i": start + b * batch + k, "name": f"w-{k}", "tags": ["a", "b"]} for k in range(batch)
        ]  # fmt: skip
        t0 = time.perf_counter()
        run({"rows": rows})
        times.append(time.perf_counter() - t0)
    total = sum(times)
    return {
        "batches": batches,
        "batch_rows": batch,
        "rows_per_s": round(batches * batch / total),
        "batch_p50_ms": round(pct(times, 50) * 1000, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--write-batches", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "bench/results/byog.json"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, ServerProcess(Path(tmp) / "data") as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        c = Http(srv.port, key)
        status, body = c.post("/byog/databases", {"database": DB})
        assert status == 200, body
        built = build(c, args.nodes, args.batch)
        g = engine_graph(Path(tmp) / "data")

        def over_http(p: dict[str, Any]) -> Any:
            return http_query(c, TWO_HOP, p)

        def direct(p: dict[str, Any]) -> Any:
            return g.ro_query(TWO_HOP, params=p, timeout=8000).result_set

        # the same answers both ways, then alternate rounds so drift hits both equally
        assert sorted(r["i"] for r in over_http({"i": 5})) == sorted(row[0] for row in direct({"i": 5}))
        http_t: list[float] = []
        eng_t: list[float] = []
        for rnd in range(4):
            http_t += time_reads(over_http, args.nodes, args.queries // 4, seed=rnd)
            eng_t += time_reads(direct, args.nodes, args.queries // 4, seed=rnd)
        rows = statistics.fmean(len(direct({"i": i})) for i in range(0, args.nodes, max(1, args.nodes // 200)))

        w_http = time_writes(lambda p: http_query(c, WRITE_BATCH, p), args.write_batches, args.batch, 0)
        w_eng = time_writes(
            lambda p: g.query(WRITE_BATCH, params=p, timeout=30000), args.write_batches, args.batch, 10**7
        )
        srv.stop()  # clean shutdown: the engine writes its snapshot before the folder goes
    reads = {"http": summary(http_t), "engine": summary(eng_t)}
    added = round(reads["http"]["p50_ms"] - reads["engine"]["p50_ms"], 3)
    result = {
        "graph": built,
        "two_hop": {"query": TWO_HOP, "queries": len(http_t), "mean_rows": round(rows, 1), **reads},
        "service_added_p50_ms": added,
        "writes": {"query": WRITE_BATCH, "http": w_http, "engine": w_eng},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"graph: {built}")
    print("| 2-hop MATCH | p50 ms | p95 ms | mean ms |")
    print("|---|---:|---:|---:|")
    for k in ("http", "engine"):
        s = reads[k]
        print(f"| {k} | {s['p50_ms']} | {s['p95_ms']} | {s['mean_ms']} |")
    print(f"service adds {added} ms at p50 (goal <= 2 ms); {rows:.1f} rows per answer on average")
    print("| UNWIND ... CREATE | rows/s | batch p50 ms |")
    print("|---|---:|---:|")
    for k, w in (("http", w_http), ("engine", w_eng)):
        print(f"| {k} ({w['batch_rows']} rows/batch) | {w['rows_per_s']} | {w['batch_p50_ms']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
