"""Cold-start proxy for each Lambda function: import time of functions/<name>/app.py in a fresh interpreter.

Each sample is a new Python process that imports the handler module exactly as Lambda's runtime would
(building the AWS container: boto3 clients, no network calls) and reports the elapsed time and which
router modules came along. Sizes come from a `sam build` output folder when one is given.

    uv run python bench/aws/import_times.py [--runs 5] [--build-dir /tmp/ctxstore-sam-build]

Writes bench/results/aws_import_times.json. Numbers are from this machine's CPython (the venv's),
not from Lambda's python3.12 on arm64: compare functions with each other and over time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py"))
LAMBDA_LIMIT_BYTES = 262_144_000  # function + layers, unzipped

CHILD = r"""
import importlib.util, json, sys, time
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
ms = (time.perf_counter() - t0) * 1000
routers = sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("ctxstore.http.routers."))
print(json.dumps({"ms": ms, "modules": len(sys.modules), "routers": routers}))
"""

ENV = {
    "CTXSTORE_BACKEND": "aws",
    "CTXSTORE_RECORDS_TABLE": "bench-records",
    "CTXSTORE_JOBS_TABLE": "bench-jobs",
    "CTXSTORE_BLOB_BUCKET": "bench-blobs",
    # As template.yaml sets them on every function: the OpenSearch client and Bedrock embedder are built too.
    "CTXSTORE_SEARCH_ENDPOINT": "https://bench.us-east-1.aoss.amazonaws.com",
    "CTXSTORE_EMBEDDING_MODEL_ID": "amazon.titan-embed-text-v2:0",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "POWERTOOLS_SERVICE_NAME": "ctxstore",
    "POWERTOOLS_METRICS_NAMESPACE": "ctxstore",
}


def sample(name: str) -> dict[str, object]:
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT / "layers/core"), "PYTHONDONTWRITEBYTECODE": "0"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "functions" / name / "app.py")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build-dir", type=Path, default=None, help="a `sam build --build-dir` output")
    args = ap.parse_args()

    report: dict[str, object] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "runs": args.runs,
        "note": "fresh-process import of functions/<name>/app.py incl. container build; first run warms caches",
        "functions": {},
    }
    functions: dict[str, object] = {}
    for name in FUNCTIONS:
        sample(name)  # warm the OS page cache and .pyc files, as a provisioned runtime would have them
        runs = [sample(name) for _ in range(args.runs)]
        ms = [float(r["ms"]) for r in runs]  # type: ignore[arg-type]
        functions[name] = {
            "median_ms": round(statistics.median(ms), 1),
            "min_ms": round(min(ms), 1),
            "max_ms": round(max(ms), 1),
            "modules_loaded": runs[-1]["modules"],
            "routers_loaded": runs[-1]["routers"],
        }
    if args.build_dir and args.build_dir.is_dir():
        layers = sum(dir_bytes(args.build_dir / layer) for layer in ("CoreLayer", "DepsLayer"))
        sizes: dict[str, object] = {
            "core_layer_bytes": dir_bytes(args.build_dir / "CoreLayer"),
            "deps_layer_bytes": dir_bytes(args.build_dir / "DepsLayer"),
            "lambda_limit_bytes": LAMBDA_LIMIT_BYTES,
        }
        for name in FUNCTIONS:
            fn_dirs = [d for d in args.build_dir.iterdir() if d.is_dir() and (d / "app.py").is_file()]
            for d in fn_dirs:
                if (d / "app.py").read_bytes() == (ROOT / "functions" / name / "app.py").read_bytes():
                    total = dir_bytes(d) + layers
                    sizes[name] = {
                        "function_bytes": dir_bytes(d),
                        "unzipped_total_bytes": total,
                        "headroom_bytes": LAMBDA_LIMIT_BYTES - total,
                    }
        report["sizes"] = sizes
    report["functions"] = functions
    out = ROOT / "bench/results/aws_import_times.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
