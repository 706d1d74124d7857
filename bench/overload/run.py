"""Overload benchmark (issue 12 item 5): many query clients and ingest clients at once against `ctxstore serve`.

    uv run python -m bench.overload.run [--queries 200] [--ingests 50] [--seconds 60]

Each client is a loop of requests on its own connection (asyncio + httpx, bounded in count and time,
127.0.0.1 only). Reports per class: accepted requests/s, p50/p99/max latency of accepted requests,
the share refused (503/429 with Retry-After), and requests that got no HTTP answer at all (must be 0).
Writes bench/results/overload.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
WORDS = [
    "context",
    "store",
    "retrieval",
    "memory",
    "graph",
    "vector",
    "keyword",
    "hybrid",
    "chunk",
    "index",
    "query",
    "latency",
    "pipeline",
]


def _text(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(120)) + f". Document {i}."


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


class Tally:
    def __init__(self) -> None:
        self.accepted: list[float] = []
        self.refused = 0
        self.errors = 0  # other HTTP statuses
        self.dropped: list[str] = []  # no HTTP answer at all

    def report(self, seconds: float) -> dict[str, Any]:
        total = len(self.accepted) + self.refused + self.errors + len(self.dropped)
        return {
            "requests": total,
            "accepted": len(self.accepted),
            "accepted_per_s": round(len(self.accepted) / seconds, 1),
            "p50_ms": _pct(self.accepted, 0.5),
            "p99_ms": _pct(self.accepted, 0.99),
            "max_ms": round(max(self.accepted) * 1000, 1) if self.accepted else None,
            "mean_ms": round(statistics.fmean(self.accepted) * 1000, 1) if self.accepted else None,
            "refused": self.refused,
            "refused_share": round(self.refused / total, 3) if total else 0.0,
            "other_errors": self.errors,
            "dropped": len(self.dropped),
            "dropped_examples": self.dropped[:5],
        }


async def _client_loop(
    client: httpx.AsyncClient, kind: str, n: int, deadline: float, tally: Tally, counter: list[int]
) -> None:
    while time.monotonic() < deadline:
        counter[0] += 1
        i = counter[0]
        started = time.monotonic()
        try:
            if kind == "query":
                r = await client.post("/query", json={"database": "load", "query": " ".join(WORDS[i % 9 : i % 9 + 3])})
            else:
                item = {"id": f"load-{n}-{i}", "title": f"Load {i}", "type": "note", "content": {"text": _text(i)}}
                r = await client.post("/context/ingest", data={"database": "load", "app_knowledge": json.dumps([item])})
        except httpx.HTTPError as exc:
            tally.dropped.append(f"{type(exc).__name__} after {time.monotonic() - started:.1f}s")
            continue
        took = time.monotonic() - started
        if r.status_code in (200, 202):
            tally.accepted.append(took)
        elif r.status_code in (429, 503) and r.headers.get("retry-after"):
            tally.refused += 1
            await asyncio.sleep(min(float(r.headers["retry-after"]), 2.0))  # a polite client backs off
        else:
            tally.errors += 1


async def _load(base: str, key: str, queries: int, ingests: int, seconds: float) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}", "API-Version": "2"}
    tallies = {"query": Tally(), "ingest": Tally()}
    deadline = time.monotonic() + seconds
    clients: list[httpx.AsyncClient] = []
    tasks = []
    counter = [0]
    for kind, n in (("query", queries), ("ingest", ingests)):
        for c in range(n):
            client = httpx.AsyncClient(base_url=base, headers=headers, timeout=120)
            clients.append(client)
            tasks.append(_client_loop(client, kind, c, deadline, tallies[kind], counter))
    started = time.monotonic()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - started
    for client in clients:
        await client.aclose()
    return {kind: t.report(elapsed) for kind, t in tallies.items()} | {"elapsed_s": round(elapsed, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ingests", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed-docs", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "overload.json")
    ap.add_argument(
        "--compare", action="store_true", help="also run with admission control off (the reference), same run"
    )
    args = ap.parse_args()
    runs = {"admission": _run(args, {})}
    if args.compare:
        off = {
            "CTXSTORE_MAX_INFLIGHT_QUERIES": "0",
            "CTXSTORE_MAX_INFLIGHT_INGESTS": "0",
            "CTXSTORE_MAX_INFLIGHT_OTHER": "0",
        }
        runs["no_admission"] = _run(args, off)
    report = {
        "what": "overload: concurrent query + ingest clients against ctxstore serve over HTTP (127.0.0.1)",
        "clients": {"query": args.queries, "ingest": args.ingests},
        "seconds": args.seconds,
        "cores": os.cpu_count(),
        **runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


def _run(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp) / "data", env=env) as srv:
        srv.wait_ready(60)
        [key] = srv.printed_keys
        with srv.client(key) as c:
            c.post("/databases", json={"database": "load"})
            while not c.get("/databases/status", params={"database": "load"}).json()["data"]["infra"][
                "ready_for_ingestion"
            ]:
                time.sleep(0.1)
            for start in range(0, args.seed_docs, 50):
                items = [
                    {"id": f"seed-{i}", "title": f"Seed {i}", "type": "note", "content": {"text": _text(i)}}
                    for i in range(start, min(start + 50, args.seed_docs))
                ]
                c.post("/context/ingest", data={"database": "load", "app_knowledge": json.dumps(items)})
            time.sleep(5)
        load_before = os.getloadavg()
        result = asyncio.run(_load(srv.base_url, key, args.queries, args.ingests, args.seconds))
        load_after = os.getloadavg()
        with srv.client(key) as c:
            result["health_after"] = c.get("/health").status_code
    return {
        "server_env": env,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        **result,
    }


if __name__ == "__main__":
    main()
