"""Agent-access benchmark: the MCP query tool over Streamable HTTP, and `ctxstore ingest` of a folder.

    uv run python -m bench.agent.run [--part mcp|ingest|all] [--queries 150]

1. MCP `ctxstore_query` round trip at 10k chunks: a real `ctxstore serve` over the retrieval benchmark's 10k
   SciFact corpus (written straight into the index, as bench.retrieval does), queried through an MCP client
   session over HTTP (one session per protocol era, reused). Reference in the same run, interleaved call by
   call: `POST /query` with the same body. Different unseen queries on each side (no cache hits).
2. CLI folder ingest of parser_docs: `ctxstore ingest FOLDER` as a subprocess (upload, then its progress
   polling until every item is indexed or errored), against the reference in the same run: bench.ingest's
   plain-HTTP loop (one file per request, status polled once a second) on the same files, each on a fresh
   server.

Writes bench/results/agent.json and prints a report with the 1-minute load average at each step.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.support.server import ServerProcess

from bench.ingest.run import PARSER_DOCS, bench_parser_docs
from bench.retrieval.baselines import load_jsonl
from bench.retrieval.run import SCIFACT, Local, build_latency_corpus, embed_cached

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "results" / "agent.json"
DB = "lat10k"
BOOKKEEPING = {"index.json", "expectations.json", "expectations_detail.json"}


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return round((ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)) * 1000, 2)


def summary(times: list[float]) -> dict[str, Any]:
    return {
        "p50_ms": pct(times, 50),
        "p95_ms": pct(times, 95),
        "mean_ms": round(statistics.mean(times) * 1000, 2),
        "n": len(times),
    }


# ---- 1. MCP query tool ----------------------------------------------------------------------------


def _corpus(data_dir: Path) -> str:
    scratch = Local(data_dir)
    try:  # the retrieval benchmark's SciFact vectors, computed once into bench/.cache if absent
        corpus = load_jsonl(SCIFACT / "corpus.jsonl")
        embed_cached("scifact", [f"{d.get('title', '')} {d['text']}".strip() for d in corpus], scratch)
    finally:
        scratch.close()
    return build_latency_corpus(data_dir, [10_000])


async def _interleaved(url: str, key: str, queries: list[str], mode: str) -> tuple[list[float], list[float]]:
    body = {"type": "knowledge", "mode": "fast", "max_results": 10, "graph_context": True}
    headers = {"Authorization": f"Bearer {key}", "X-Ctxstore-Database": DB}
    api_times: list[float] = []
    mcp_times: list[float] = []
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http), mode=mode) as mcp,
        httpx2.AsyncClient(base_url=url, headers={**headers, "API-Version": "2"}, timeout=60) as api,
    ):
        for warm in ("warm up the model", "warm up the caches"):  # not timed
            await mcp.call_tool("ctxstore_query", {"query": warm, **body})
            await api.post("/query", json={"database": DB, "query": warm, **body})
        for i in range(0, len(queries) - 1, 2):
            t = time.perf_counter()
            r = await api.post("/query", json={"database": DB, "query": queries[i], **body})
            api_times.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
            t = time.perf_counter()
            res = await mcp.call_tool("ctxstore_query", {"query": queries[i + 1], **body})
            mcp_times.append(time.perf_counter() - t)
            assert not res.is_error and "[1] score" in res.content[0].text, res  # type: ignore[union-attr]
    return api_times, mcp_times


def bench_mcp(n_queries: int) -> dict[str, Any]:
    queries = [q["text"] for q in load_jsonl(SCIFACT / "queries.jsonl")]
    random.Random(23).shuffle(queries)
    out: dict[str, Any] = {"chunks": 10_000, "body": "type=knowledge mode=fast max_results=10 graph_context=true"}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        key = _corpus(data_dir)
        with ServerProcess(data_dir) as server:
            server.wait_ready(120)
            for era, mode in (("legacy session (2025 handshake)", "legacy"), ("2026-07-28 sessionless", "auto")):
                batch = queries[:n_queries] if mode == "legacy" else queries[n_queries : 2 * n_queries]
                before = load()
                api, mcp = anyio.run(_interleaved, server.base_url, key, batch, mode)
                out[era] = {
                    "load_before": before,
                    "load_after": load(),
                    "mcp_tool": summary(mcp),
                    "http_query_reference": summary(api),
                    "p50_ratio_mcp_over_http": round(pct(mcp, 50) / pct(api, 50), 2),
                }
                row = out[era]
                print(
                    f"  {era}: MCP p50 {row['mcp_tool']['p50_ms']} ms p95 {row['mcp_tool']['p95_ms']} ms | "
                    f"POST /query p50 {row['http_query_reference']['p50_ms']} ms | "
                    f"ratio {row['p50_ratio_mcp_over_http']} | load {before} -> {row['load_after']}",
                    flush=True,
                )
            server.stop()
    return out


# ---- 2. CLI folder ingest -------------------------------------------------------------------------


def _parser_docs_copy(dest: Path) -> Path:
    """The files bench.ingest sends (bookkeeping and expected outputs left out), in their folders."""
    for p in sorted(PARSER_DOCS.rglob("*")):
        if p.is_file() and p.name not in BOOKKEEPING and "expected_outputs" not in p.parts:
            target = dest / p.relative_to(PARSER_DOCS)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, target)
    return dest


def _cli_ingest(folder: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp) / "data") as server:
        server.wait_ready(120)
        [key] = server.printed_keys
        env = {"CTXSTORE_URL": server.base_url, "CTXSTORE_API_KEY": key, "CTXSTORE_CONFIG": str(Path(tmp) / "c.json")}
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("CTXSTORE_")}, **env}
        cmd = [sys.executable, "-m", "ctxstore.cli"]
        subprocess.run([*cmd, "database", "create", "docs"], env=env, check=True, capture_output=True, timeout=120)
        before = load()
        t = time.perf_counter()
        done = subprocess.run(
            [*cmd, "-o", "json", "ingest", str(folder), "-d", "docs"],
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        wall = time.perf_counter() - t
        report = json.loads(done.stdout)
        server.stop()
    return {
        "wall_s": round(wall, 2),
        "exit_code": done.returncode,
        "counts": report["counts"],
        "load_before": before,
        "load_after": load(),
    }


def _reference_ingest() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp) / "data") as server:
        server.wait_ready(120)
        [key] = server.printed_keys
        before = load()
        with server.client(key) as c:
            c.timeout = httpx.Timeout(120)
            ref = bench_parser_docs(c)
        server.stop()
    return {**ref, "load_before": before, "load_after": load()}


def bench_ingest(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = _parser_docs_copy(Path(tmp) / "parser_docs")
        files = sum(1 for p in folder.rglob("*") if p.is_file())
        out: dict[str, Any] = {"files": files, "rounds": []}
        for i in range(rounds):  # alternate, so drift in the shared machine's load hits both sides
            ref = _reference_ingest()
            cli = _cli_ingest(folder)
            ratio = round(cli["wall_s"] / ref["total_s"], 2)
            out["rounds"].append({"cli": cli, "http_reference": ref, "ratio_cli_over_http": ratio})
            print(
                f"  round {i + 1}: ctxstore ingest {cli['wall_s']} s (exit {cli['exit_code']}, {cli['counts']}) | "
                f"plain HTTP loop {ref['total_s']} s ({ref['completed']} completed, {ref['errored']} errored) | "
                f"ratio {ratio} | load {ref['load_before']} -> {cli['load_after']}",
                flush=True,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["mcp", "ingest", "all"], default="all")
    parser.add_argument("--queries", type=int, default=150, help="queries per protocol era (half MCP, half HTTP)")
    parser.add_argument("--rounds", type=int, default=1, help="ingest rounds (each: reference, then CLI)")
    args = parser.parse_args()
    result: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    result["started"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    result["load_at_start"] = load()
    if args.part in ("mcp", "all"):
        print("MCP ctxstore_query over Streamable HTTP, 10k chunks", flush=True)
        result["mcp_query_10k"] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **bench_mcp(args.queries)}
    if args.part in ("ingest", "all"):
        print("ctxstore ingest of parser_docs", flush=True)
        result["cli_ingest_parser_docs"] = {
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            **bench_ingest(args.rounds),
        }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
