"""Issue 27 part 1: a server without an optional system program (tesseract) says so at start and rejects what
needs it with a code that names the cause (E3002), never a traceback; `ctxstore doctor` lists each optional part
as found or missing with what degrades."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image, ImageDraw

from tests.support.server import ServerProcess


def _png() -> bytes:
    img = Image.new("RGB", (400, 120), "white")
    ImageDraw.Draw(img).text((10, 50), "Quarterly invoice total 4200", fill="black")
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def test_without_tesseract_serve_warns_and_an_image_ends_errored_with_e3002(tmp_path: Path) -> None:
    # PATH holds the interpreter's folder alone: every program but tesseract is reached by absolute path.
    no_ocr = {"PATH": str(Path(sys.executable).parent)}
    with ServerProcess(tmp_path / "data", env=no_ocr) as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        assert any("OCR unavailable" in line and "E3002" in line for line in srv.lines), srv.lines
        with srv.client(key) as c:
            assert c.post("/databases", json={"database": "acme"}).status_code == 202
            deadline = time.time() + 30
            while not c.get("/databases/status", params={"database": "acme"}).json()["data"]["infra"][
                "ready_for_ingestion"
            ]:
                assert time.time() < deadline
                time.sleep(0.05)
            r = c.post("/context/ingest", data={"database": "acme"}, files=[("documents", ("scan.png", _png()))])
            assert r.status_code == 202, r.text
            item = r.json()["data"]["results"][0]["id"]
            deadline = time.time() + 60
            while True:
                [status] = c.get("/context/status", params={"database": "acme", "ids": item}).json()["data"]["statuses"]
                if status["indexing_status"] in ("errored", "completed") or time.time() > deadline:
                    break
                time.sleep(0.2)
            assert status["indexing_status"] == "errored"
            assert status["error_code"] == "E3002" and "tesseract" in status["error_message"]
        assert srv.stop() == 0
    assert not any("Traceback" in line for line in srv.lines)


def test_with_tesseract_serve_does_not_warn(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as srv:
        srv.wait_ready()
        assert not any("OCR unavailable" in line for line in srv.lines)
        assert srv.stop() == 0


def _doctor(env: dict[str, str]) -> dict[str, dict[str, str]]:
    # No server: doctor still reports this machine's optional parts (its reachability check fails: exit 1+).
    proc = subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", "doctor", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CTXSTORE_URL": "http://127.0.0.1:9", **env},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return {p["part"]: p for p in json.loads(proc.stdout)["optional_parts"]}


def test_doctor_names_a_missing_tesseract_and_what_degrades(tmp_path: Path) -> None:
    checks = _doctor({"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)})
    ocr = checks["tesseract (OCR)"]
    assert ocr["state"] == "missing"  # a degradation, listed apart from the failed checks
    assert "E3002" in ocr["detail"] and ocr["fix"] == "apt install tesseract-ocr"
    for part in ("graph engine (FalkorDB)", "spaCy model (en_core_web_sm)", "embedding model", "uvicorn (HTTP server)"):
        assert checks[part]["state"] == "ok", checks[part]


def test_doctor_finds_tesseract_on_path(tmp_path: Path) -> None:
    checks = _doctor({"HOME": str(tmp_path)})
    assert checks["tesseract (OCR)"]["state"] == "ok"
    assert checks["tesseract (OCR)"]["detail"].endswith("tesseract")
