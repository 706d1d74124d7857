"""Issue 27 part 3: the data dir records its format; the new code opens an older release's data dir (migrating it
once, idempotently) and refuses a newer release's, naming both versions.

The fixture tests/fixtures/datadir-2.0.0 was written by scripts/make-fixture-datadir.py with release 2.0.0; its
expected.json holds the key, the items and a query's top ids at that point.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.local.data_dir_format import CURRENT, DataDirTooNew, open_data_dir, product_version
from tests.support.server import ServerProcess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RELEASES = sorted(p.name.removeprefix("datadir-") for p in FIXTURES.glob("datadir-*") if p.is_dir())


def _copy(release: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / f"datadir-{release}", data)
    return data, json.loads((FIXTURES / f"datadir-{release}.expected.json").read_text())


def _format(data: Path) -> dict[str, Any]:
    return json.loads((data / "format.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("release", RELEASES)
def test_fixture_of_a_release_opens_answers_and_keeps_every_item(release: str, tmp_path: Path) -> None:
    data, expected = _copy(release, tmp_path)
    with ServerProcess(data) as srv:
        srv.wait_ready()
        assert srv.printed_keys == []  # the release's key, not a new organisation
        with srv.client(str(expected["api_key"])) as c:
            ids = list(expected["items"])
            found = c.get("/context/status", params={"database": "acme", "ids": ",".join(ids)}).json()["data"]
            assert {s["id"]: s["indexing_status"] for s in found["statuses"]} == dict.fromkeys(ids, "completed")
            for i in ids:
                assert c.get("/context/chunks", params={"database": "acme", "id": i}).json()["data"]["total"] >= 1
            relations = c.get("/context/relations", params={"database": "acme", "id": "acq"}).json()["data"]
            assert relations["relations"], "the graph came through"
            answer = c.post("/query", json={"database": "acme", "query": expected["query"], "max_results": 3})
            assert answer.status_code == 200, answer.text
            assert [chunk["id"] for chunk in answer.json()["data"]["chunks"]] == expected["top_ids"]
        assert srv.stop() == 0
    assert _format(data)["format"] == CURRENT


def test_a_data_dir_from_before_formats_were_recorded_is_migrated_once(tmp_path: Path) -> None:
    data, _ = _copy("2.0.0", tmp_path)
    (data / "format.json").unlink()  # as releases up to 2.0.0 left it
    assert open_data_dir(data) == list(range(1, CURRENT + 1))
    first = _format(data)
    assert first["format"] == CURRENT
    assert [m["to"] for m in first["migrations"]] == list(range(1, CURRENT + 1))
    assert open_data_dir(data) == []  # once: the second start finds nothing to do
    assert _format(data) == first


def test_a_new_data_dir_starts_at_the_current_format(tmp_path: Path) -> None:
    assert open_data_dir(tmp_path / "new") == []
    assert _format(tmp_path / "new") == {"format": CURRENT, "written_by": product_version(), "migrations": []}


def test_a_newer_release_data_dir_is_refused_naming_both_versions(tmp_path: Path) -> None:
    data, _ = _copy("2.0.0", tmp_path)
    (data / "format.json").write_text(json.dumps({"format": CURRENT + 1, "written_by": "9.1.0", "migrations": []}))
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()}
    with pytest.raises(DataDirTooNew, match=r"9\.1\.0.*" + product_version().replace(".", r"\.")):
        open_data_dir(data)

    serve = subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", "serve", "--data-dir", str(data), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert serve.returncode == 1
    assert "9.1.0" in serve.stderr and f"ctxstore {product_version()}" in serve.stderr
    assert f"format {CURRENT + 1}" in serve.stderr and "Traceback" not in serve.stderr
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file() and p.name != "serve.lock"} == before
