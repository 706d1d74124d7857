"""scripts/aws-smoke.py, the check a user runs after `sam deploy`, run here against a real `ctxstore serve`.

The same HTTP API answers locally and on AWS, so running the script against the local server in the suite keeps
it from rotting: every step must pass on a healthy server, and a bad key must fail it with a non-zero exit.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.aws.moto_env import ROOT
from tests.support.server import ServerProcess

SCRIPT = ROOT / "scripts" / "aws-smoke.py"
STEPS = [
    "GET /health",
    "GET /openapi.json",
    "the API key is accepted (GET /databases)",
    "create a database and wait until it is ready",
    "ingest one small text",
    "indexing reaches completed",
    "a query finds the text",
    "delete the item",
    "no query returns the text any more",
    "delete the database (clean-up, runs after a failure too)",
]


def _smoke(url: str, key: str) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable,
        str(SCRIPT),
        "--url",
        url,
        "--key",
        key,
        "--index-timeout",
        "120",
        "--visible-timeout",
        "60",
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=400, check=False)


def test_smoke_script_passes_every_step_against_a_live_server_and_fails_on_a_bad_key(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        ok = _smoke(srv.base_url, key)
        lines = ok.stdout.splitlines()
        assert ok.returncode == 0, ok.stdout + ok.stderr[-3000:]
        assert [re.sub(r" \(\d+\.\d s\).*$", "", line) for line in lines[:-1]] == [f"PASS {s}" for s in STEPS], lines
        assert lines[-1] == "RESULT PASS"
        with srv.client(key) as c:  # it cleaned up after itself
            assert c.get("/databases").json()["data"]["databases"] == []

        bad = _smoke(srv.base_url, "csk_nottherealkey_0000000000000000")
        assert bad.returncode == 1, bad.stdout
        out = bad.stdout.splitlines()
        assert out[0].startswith("PASS GET /health") and out[2].startswith("FAIL the API key is accepted"), out
        assert "UNAUTHORIZED" in out[2] and out[3].startswith("SKIP create a database") and out[-1] == "RESULT FAIL"
