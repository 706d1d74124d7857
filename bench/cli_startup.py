"""DIAGNOSTIC: how long the `ctxstore` command takes to start, as a user runs it (issue 26: <= 0.3 s).

Starts a real `ctxstore serve` (fresh data dir, one database holding one note), then times fresh processes of
the installed `ctxstore` script: `--help`, `query --help` and a real `query` against that server (as a table,
and `-o json`), and
`python -c pass` as the reference for this machine at this moment. The commands run round-robin, so a burst of
load from elsewhere hits all of them alike; each figure is the median of --runs processes (wall seconds, and
the child's CPU seconds, which moves less with the machine's load).

The real query's time includes the server answering it: the same query sent --runs times from a warm client in
this process gives that latency, and `start_s` = median wall - median latency is what the command itself adds.

    uv run python bench/cli_startup.py [--runs 15]

Writes bench/results/cli_startup.json (with `uptime` before and after) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.server import ServerProcess  # noqa: E402

from ctxstore.client import CtxstoreClient  # noqa: E402

OUT = ROOT / "bench" / "results" / "cli_startup.json"
TARGET_S = 0.3
DATABASE = "startup"
QUERY = "which animal jumps over the dog"
REAL_QUERIES = ("ctxstore query (real)", "ctxstore query -o json")  # these wait for the server's answer too


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


def ctxstore_command() -> list[str]:
    """The console script next to this interpreter (what `pip install` puts on PATH), else `python -m`."""
    script = Path(sys.executable).parent / "ctxstore"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ctxstore.cli"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall and CPU seconds (user + system) of one fresh process, and its exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def summary(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(walls), 4),
        "min_s": round(min(walls), 4),
        "max_s": round(max(walls), 4),
        "cpu_median_s": round(statistics.median(cpus), 4),
        "samples_s": [round(w, 4) for w in walls],
    }


def prepare(server: ServerProcess, key: str, env: dict[str, str]) -> None:
    """One database with one note in it, indexed, so the query finds something."""
    with CtxstoreClient(server.base_url, key, database=DATABASE) as client:
        client.databases.create(DATABASE)
        client.databases.wait_ready(DATABASE, timeout=120)
    note = "The quick brown fox jumps over the lazy dog near the riverbank."
    cmd = [*ctxstore_command(), "ingest", "-d", DATABASE, "--text", note]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)


def server_latency(server: ServerProcess, key: str, runs: int) -> list[float]:
    with CtxstoreClient(server.base_url, key, database=DATABASE) as client:
        client.query(QUERY)  # warm the connection
        out = []
        for _ in range(runs):
            started = time.perf_counter()
            client.query(QUERY)
            out.append(time.perf_counter() - started)
    return out


def measure(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp) / "data") as server:
        server.wait_ready(180)
        [key] = server.printed_keys
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTXSTORE_")}
        env.update(
            CTXSTORE_URL=server.base_url,
            CTXSTORE_API_KEY=key,
            CTXSTORE_CONFIG=str(Path(tmp) / "config.json"),
            COLUMNS="120",
        )
        prepare(server, key, env)
        cli = ctxstore_command()
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "ctxstore --help": [*cli, "--help"],
            "ctxstore query --help": [*cli, "query", "--help"],
            "ctxstore query (real)": [*cli, "query", "-d", DATABASE, QUERY],
            "ctxstore query -o json": [*cli, "query", "-d", DATABASE, QUERY, "-o", "json"],
        }
        for cmd in commands.values():  # one untimed run each: bytecode written, files in the page cache
            timed(cmd, env)
        uptime_before, load_before = uptime(), os.getloadavg()
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        codes: dict[str, set[int]] = {name: set() for name in commands}
        for _ in range(runs):
            for name, cmd in commands.items():
                wall, cpu, code = timed(cmd, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
                codes[name].add(code)
        latency = server_latency(server, key, runs)
        uptime_after, load_after = uptime(), os.getloadavg()
        server.stop()

    results = {name: {**summary(walls[name], cpus[name]), "exit_codes": sorted(codes[name])} for name in commands}
    reference = results["python -c pass"]["median_s"]
    query_latency = statistics.median(latency)
    for name, row in results.items():
        row["over_python_s"] = round(row["median_s"] - reference, 4)
        if name.startswith("ctxstore"):
            start = row["median_s"] - (query_latency if name in REAL_QUERIES else 0.0)
            row["start_s"] = round(start, 4)
            row["within_target"] = start <= TARGET_S
    return {
        "kind": "diagnostic",
        "what": "wall and CPU seconds of fresh `ctxstore` processes (the installed script), median of the runs; "
        "start_s excludes the server's own query latency, measured from a warm client in the same run",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "uptime_before": uptime_before,
        "uptime_after": uptime_after,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "runs": runs,
        "target_s": TARGET_S,
        "command": cli,
        "server_query_latency_s": {
            "median_s": round(query_latency, 4),
            "min_s": round(min(latency), 4),
            "max_s": round(max(latency), 4),
        },
        "results": results,
    }


def report(data: dict[str, Any]) -> str:
    lines = [
        f"ctxstore start-up, median of {data['runs']} fresh processes ({data['uptime_before']})",
        f"{'command':<24}{'wall':>8}{'min':>8}{'cpu':>8}{'start':>8}  target {data['target_s']} s",
    ]
    for name, row in data["results"].items():
        start = f"{row['start_s']:8.3f}" if "start_s" in row else " " * 8
        verdict = ("ok" if row["within_target"] else "OVER") if "within_target" in row else ""
        lines.append(f"{name:<24}{row['median_s']:8.3f}{row['min_s']:8.3f}{row['cpu_median_s']:8.3f}{start}  {verdict}")
    lines.append(f"server query latency (warm client): {data['server_query_latency_s']['median_s']:.3f} s median")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = measure(args.runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(report(data))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
