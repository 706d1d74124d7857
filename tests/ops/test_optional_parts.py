"""Issue 27 part 1: a server without an optional system program (tesseract) says so at start and rejects what
needs it with a code that names the cause (E3002), never a traceback."""

from __future__ import annotations

import io
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
