"""Install the wheel with plain pip from the package index (not uv.lock) and use it: a release check.

    python3 scripts/check-pip-install.py [--wheel dist/ctxstore-*.whl] [--work /tmp/ctxstore-pip]

Needs the package index (it downloads), so it is not part of the test suite (tests/ops/test_wheel_install.py
checks the wheel offline against the locked set). pip resolves on its own: pycel caps networkx below 2.7, which
uv.lock overrides to 3.x and pip does not. This checks the product still works on what pip picks: `pip check`,
`ctxstore --help`, then `ctxstore serve` ingests spreadsheets (pycel's path), a Word file and a PDF to completed
and answers a query.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.server import ServerProcess  # noqa: E402

DOCS = Path(ROOT.parent / "shared" / "data" / "parser_docs")
FILES = [
    DOCS / "unstructured" / "stanley-cups.xlsx",
    DOCS / "markitdown" / "test.xlsx",
    DOCS / "markitdown" / "rlink.docx",
    DOCS / "markitdown" / "REPAIR-2022-INV-001_multipage.pdf",
]


def _run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, default=None)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ctxstore-pip"))
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    wheel = args.wheel
    if wheel is None:
        _run("python3", "-m", "uv", "build", "--wheel", "-o", str(args.work / "dist"))
        wheel = next((args.work / "dist").glob("ctxstore-*.whl"))
    venv = args.work / "venv"
    _run(sys.executable, "-m", "venv", str(venv))
    started = time.perf_counter()
    _run(str(venv / "bin" / "pip"), "install", "-q", f"{wheel}[local]")
    print(f"pip install: {time.perf_counter() - started:.0f} s")
    print(_run(str(venv / "bin" / "pip"), "check").strip())
    versions = _run(str(venv / "bin" / "pip"), "show", "networkx", "pycel")
    print(" ".join(line for line in versions.splitlines() if line.startswith(("Name", "Version"))))
    _run(str(venv / "bin" / "ctxstore"), "--help")

    server = ServerProcess(args.work / "data", program=[str(venv / "bin" / "ctxstore")])
    try:
        server.wait_ready(300)
        http = server.client(server.printed_keys[0])
        http.timeout = 120
        http.post("/databases", json={"database": "pip"}).raise_for_status()
        while not http.get("/databases/status", params={"database": "pip"}).json()["data"]["infra"][
            "ready_for_ingestion"
        ]:
            time.sleep(0.1)
        ids = []
        for f in FILES:
            with f.open("rb") as fh:
                r = http.post("/context/ingest", data={"database": "pip"}, files={"documents": (f.name, fh)})
            r.raise_for_status()
            ids += [x["id"] for x in r.json()["data"]["results"]]
        deadline = time.monotonic() + 300
        while True:
            statuses = http.get("/context/status", params={"database": "pip", "ids": ",".join(ids)}).json()["data"][
                "statuses"
            ]
            if all(s["indexing_status"] in ("completed", "errored") for s in statuses) or time.monotonic() > deadline:
                break
            time.sleep(1)
        states = {s["id"]: (s["indexing_status"], s.get("error_code")) for s in statuses}
        print(states)
        r = http.post("/query", json={"database": "pip", "query": "Stanley Cup champions", "max_results": 3})
        r.raise_for_status()
        if any(state != "completed" for state, _ in states.values()) or not r.json()["data"]["chunks"]:
            raise SystemExit("FAILED: an item did not complete or the query found nothing")
    finally:
        server.stop()
    print("OK: the pip-installed wheel serves, parses and answers")


if __name__ == "__main__":
    main()
