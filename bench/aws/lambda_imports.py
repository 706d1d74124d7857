"""DIAGNOSTIC: per Lambda function, the cold-start import time measured the Lambda way, and its package size.

For each function of template.yaml (after `sam build`, bench/aws/lambda_package.py): a fresh `python3.12 -S`
process whose sys.path is only the function's folder and its layers (with their 3.12 bytecode), the template's
environment and fake credentials, imports the handler module (`app`) exactly once; the median of --runs such
processes is reported. Targets (issue 24): <= 0.8 s for the API functions, <= 0.15 s for health.

    uv run python bench/aws/lambda_imports.py [--runs 5] [--skip-build] [--only api_health,api_query]

Writes bench/results/lambda_imports.json and prints a table. This machine is not Lambda: Lambda gives a 512 MB
function a fraction of a vCPU, so its cold starts take longer; compare functions with each other and over time.
The layers are built for this machine's platform with the same rules as the arm64 ones (lambda_package.host_layer).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.aws.lambda_package import (  # noqa: E402
    BUDGET_BYTES,
    BUILD_DIR,
    function_bytes,
    import_handler,
    layer_bytes,
    packages,
    python312,
    sam_build,
)

OUT = ROOT / "bench" / "results" / "lambda_imports.json"
HEALTH_TARGET_S = 0.15
API_TARGET_S = 0.8


def target(name: str) -> float | None:
    if name == "api_health":
        return HEALTH_TARGET_S
    if name.startswith("api_") or name == "console_web":
        return API_TARGET_S
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-build", action="store_true", help=f"reuse {BUILD_DIR}")
    ap.add_argument("--only", default="", help="comma-separated function names")
    args = ap.parse_args()

    build = BUILD_DIR if args.skip_build else sam_build()
    py = python312()
    built = packages(build)
    layers = layer_bytes(build)
    only = {n for n in args.only.split(",") if n}
    rows: dict[str, dict[str, object]] = {}
    for name, pkg in sorted(built.items()):
        if only and name not in only:
            continue
        import_handler(pkg, py, build)  # warm the page cache once; bytecode is already in the layers
        samples: list[float] = []
        cpu: list[float] = []
        error = None
        for _ in range(args.runs):
            report = import_handler(pkg, py, build)
            if report["error"]:
                error = str(report["error"]).strip().splitlines()[-1]
                break
            samples.append(float(report["seconds"]))
            cpu.append(float(report["cpu_seconds"]))
        median = statistics.median(samples) if samples else None
        cpu_median = statistics.median(cpu) if cpu else None
        goal = target(name)
        rows[name] = {
            "median_s": None if median is None else round(median, 4),
            "samples_s": [round(s, 4) for s in samples],
            "cpu_median_s": None if cpu_median is None else round(cpu_median, 4),
            "target_s": goal,
            "within_target": None if goal is None or median is None else median <= goal,
            "error": error,
            "layers": pkg.layers,
            "bytes": function_bytes(pkg, layers),
        }
        status = (
            "ERROR " + error if error else "" if goal is None or median is None else "ok" if median <= goal else "OVER"
        )
        shown = "-" if median is None else f"{median:.3f}"
        shown_cpu = "-" if cpu_median is None else f"{cpu_median:.3f}"
        size = f"{rows[name]['bytes'] / 2**20:6.1f} MiB"  # type: ignore[operator]
        print(f"{name:20} wall {shown:>6} s  cpu {shown_cpu:>6} s  target {goal or '-':>5}  {size}  {status}")

    result = {
        "kind": "diagnostic",
        "what": "handler import time per Lambda function: python3.12 -S, only its layers on sys.path, 3.12 bytecode;"
        " median of wall and of process CPU seconds over fresh processes",
        "load_average": list(os.getloadavg()),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"platform": platform.platform(), "machine": platform.machine(), "python": py},
        "runs": args.runs,
        "budget_bytes": BUDGET_BYTES,
        "layer_bytes": layers,
        "functions": rows,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
