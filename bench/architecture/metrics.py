"""The architecture issue's before/after numbers, measured on a checkout (this one, or `--root` an older one).

Counts, over the server package `layers/core/ctxstore` (and `functions/`):
- wiring sites: modules outside the composition root (`ctxstore/runtime`, the adapters and connectors
  themselves) that import an adapter or a connector, plus `functions/*/app.py` lines beyond two;
- `dict[str, Any]` occurrences;
- None-checks on the services' container of ports (`self._c.<port> is None`, `assert self._c.<port> ...`);
- reads of the container of ports (`._c.`) in services and pipeline, and the service classes that take the whole
  `Container` against those that name their ports in the constructor;
- functions above cyclomatic complexity 15 (ruff's C901 at 15);
- modules over 500 lines;
- `ctxstore --help` wall time (median of 7 runs; `python -c pass` in the same run as the reference);
- Lambda import time per function, read from that checkout's bench/results/lambda_imports.json when it has one.

Prints a report and writes bench/results/architecture.json (with --label, under that key, so a before and
an after sit side by side).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
RESULTS = HERE / "bench" / "results" / "architecture.json"
WIRING = re.compile(r"^\s*(from|import)\s+ctxstore\.(adapters|connectors)\b", re.M)
PORT_NONE = re.compile(r"self\._c\.\w+\s+is\s+(not\s+)?None|assert\s+self\._c\.\w+")
CONTAINER_READ = re.compile(r"\._c\.\w")


def _package(root: Path) -> Path:
    return root / "layers" / "core" / "ctxstore"


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in _package(root).rglob("*.py") if "__pycache__" not in p.parts)


def wiring_sites(root: Path) -> dict[str, Any]:
    pkg = _package(root)
    own = ("runtime", "adapters", "connectors")
    sites = [
        str(p.relative_to(pkg))
        for p in _modules(root)
        if p.relative_to(pkg).parts[0] not in own and WIRING.search(p.read_text(encoding="utf-8"))
    ]
    extra = 0
    for app in sorted((root / "functions").glob("*/app.py")):
        lines = [
            ln for ln in app.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.lstrip().startswith("#")
        ]
        code = [ln for ln in lines if not ln.lstrip().startswith(('"""', "'''"))]
        extra += max(0, len(code) - 2)
    return {"modules": sites, "count": len(sites), "function_app_lines_beyond_two": extra}


def text_counts(root: Path) -> dict[str, int]:
    texts = [p.read_text(encoding="utf-8") for p in _modules(root)]
    return {
        "dict_str_any": sum(t.count("dict[str, Any]") for t in texts),
        "port_none_checks": sum(len(PORT_NONE.findall(t)) for t in texts),
    }


def container_use(root: Path) -> dict[str, Any]:
    """Container reads in services/ and pipeline/; which service classes (`*Service`, `ItemCatalog`,
    `IngestPipeline`) take it."""
    pkg = _package(root)
    reads = 0
    taking: list[str] = []
    naming: list[str] = []
    for p in _modules(root):
        if p.relative_to(pkg).parts[0] not in ("services", "pipeline"):
            continue
        text = p.read_text(encoding="utf-8")
        reads += len(CONTAINER_READ.findall(text))
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.ClassDef) and node.name.endswith(("Service", "Catalog", "Pipeline"))):
                continue
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is None:
                continue
            params = [*init.args.args, *init.args.kwonlyargs]
            takes = any(a.annotation is not None and "Container" in ast.unparse(a.annotation) for a in params)
            (taking if takes else naming).append(f"{p.relative_to(pkg)}:{node.name}")
    return {"reads": reads, "classes_taking_container": taking, "classes_naming_ports": naming}


def complexity(root: Path) -> dict[str, Any]:
    ruff = HERE / ".venv" / "bin" / "ruff"
    out = subprocess.run(
        [str(ruff), "check", "--isolated", "--select", "C901", "--config", "lint.mccabe.max-complexity=15",
         "--output-format", "json", str(_package(root))],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = json.loads(out.stdout or "[]")
    return {"over_15": len(found)}


def big_modules(root: Path) -> dict[str, Any]:
    pkg = _package(root)
    sizes = {str(p.relative_to(pkg)): sum(1 for _ in p.open(encoding="utf-8")) for p in _modules(root)}
    big = dict(sorted(((k, v) for k, v in sizes.items() if v > 500), key=lambda kv: -kv[1]))
    return {"over_500_lines": len(big), "modules": big}


def _wall(cmd: list[str], env: dict[str, str], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return round(statistics.median(times), 3)


def help_time(root: Path) -> dict[str, float]:
    # The root's own package first on the path: the venv's editable install points at this checkout.
    env = dict(os.environ, PYTHONPATH=str(root / "layers" / "core"))
    py = str(HERE / ".venv" / "bin" / "python")
    return {
        "python_pass_s": _wall([py, "-c", "pass"], env),
        "ctxstore_help_s": _wall(
            [py, "-c", "import sys; from ctxstore.cli import main; sys.argv=['ctxstore','--help']; main()"], env
        ),
    }


def lambda_imports(root: Path) -> dict[str, Any]:
    path = root / "bench" / "results" / "lambda_imports.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    rows = data.get("functions", data)
    out: dict[str, Any] = {}
    if isinstance(rows, dict):
        for name, row in rows.items():
            if isinstance(row, dict):
                out[name] = row.get("median_s", row.get("wall_s"))
    return out


def measure(root: Path) -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "root": str(root),
        "commit": subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "load_avg_1m": round(load[0], 2),
        "wiring": wiring_sites(root),
        **text_counts(root),
        "container": container_use(root),
        "complexity": complexity(root),
        "modules": big_modules(root),
        "cli": help_time(root),
        "lambda_import_s": lambda_imports(root),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=HERE)
    ap.add_argument("--label", default="after")
    args = ap.parse_args()
    result = measure(args.root.resolve())
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    saved[args.label] = result
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(saved, indent=1) + "\n")
    w = result["wiring"]
    print(f"[{args.label}] {result['commit']} (load {result['load_avg_1m']})")
    print(
        f"  wiring sites outside the root: {w['count']} {w['modules']}; "
        f"functions/*/app.py lines beyond two: {w['function_app_lines_beyond_two']}"
    )
    print(f"  dict[str, Any]: {result['dict_str_any']}   None-checks on ports: {result['port_none_checks']}")
    cu = result["container"]
    print(
        f"  container reads in services/pipeline: {cu['reads']}   service classes taking the Container: "
        f"{len(cu['classes_taking_container'])}, naming their ports: {len(cu['classes_naming_ports'])}"
    )
    print(
        f"  functions over complexity 15: {result['complexity']['over_15']}   "
        f"modules over 500 lines: {result['modules']['over_500_lines']}"
    )
    print(
        f"  ctxstore --help: {result['cli']['ctxstore_help_s']} s (python -c pass {result['cli']['python_pass_s']} s)"
    )
    if result["lambda_import_s"]:
        print("  lambda import s: " + ", ".join(f"{k} {v}" for k, v in sorted(result["lambda_import_s"].items())))


if __name__ == "__main__":
    main()
