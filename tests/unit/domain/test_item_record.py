"""The item record's type and what the code writes stay one: a key renamed on either side fails here."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
from mypy import api as mypy_api

from ctxstore.domain.ingest_request import ItemSpec, Link, Upload
from ctxstore.domain.items import STATUSES, ItemRecord, ItemRef, RelatesTo
from ctxstore.services.items.ingest import _record
from ctxstore.services.items.service import StatusExtra

ROOT = Path(__file__).resolve().parents[3]
REF = ItemRef("db", "col", "knowledge", "a")


def _specs() -> list[ItemSpec]:
    upload = Upload("report.pdf", "application/pdf", b"%PDF")
    return [
        ItemSpec("a", "knowledge", "file", "Report", upload=upload, ext="pdf", links=[Link("b", "cites")]),
        ItemSpec("a", "knowledge", "app", "Thread", text="hi", app_type="message", provider="slack", thread_id="t"),
        ItemSpec("a", "memory", "memory", "", pairs=[{"user": "u", "assistant": "a"}], infer=True, user_name="Ann"),
    ]


@pytest.mark.parametrize("spec", _specs(), ids=["file", "app", "memory"])
def test_the_ingested_record_has_exactly_the_required_keys_of_item_record(spec: ItemSpec) -> None:
    record = _record(spec, REF, "v1", "blob/key", now=2.0, created_at=1.0)
    assert set(record) == set(ItemRecord.__required_keys__)
    assert json.loads(json.dumps(record)) == record  # what the records port stores, unchanged


def test_keys_written_later_are_optional_keys_of_the_record() -> None:
    """A status change adds its extra keys: each is a key of ItemRecord, optional unless ingest writes it too."""
    extra = set(StatusExtra.__annotations__)
    assert extra <= set(ItemRecord.__required_keys__) | set(ItemRecord.__optional_keys__)
    assert set(ItemRecord.__optional_keys__) <= extra


def test_the_record_values_have_the_declared_types() -> None:
    hints = typing.get_type_hints(ItemRecord)
    record = _record(_specs()[0], REF, "v1", "blob/key", now=2.0, created_at=1.0)
    assert typing.get_args(hints["status"]) == STATUSES and record["status"] in STATUSES
    assert record["relates_to"] == [RelatesTo(id="b", relation="cites")]
    for key in ("id", "title", "version", "blob_key", "database", "collection"):
        assert isinstance(record[key], str), key  # type: ignore[literal-required]
    for key in ("timestamp", "created_at", "updated_at"):
        assert isinstance(record[key], float), key  # type: ignore[literal-required]


def _mypy(tmp_path: Path, body: str) -> tuple[str, int]:
    snippet = tmp_path / "reader.py"
    snippet.write_text("from ctxstore.domain.items import ItemRecord\n\n\n" + body)
    out, err, status = mypy_api.run(
        [
            "--strict",
            "--no-incremental",
            "--follow-imports=silent",
            "--config-file=",
            f"--cache-dir={tmp_path / 'cache'}",
            str(snippet),
        ]
    )
    return out + err, status


def test_mypy_refuses_a_key_the_item_record_does_not_have(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYPYPATH", str(ROOT / "layers" / "core"))
    wrong, status = _mypy(tmp_path, 'def title(r: ItemRecord) -> object:\n    return r["titel"]\n')
    assert status == 1 and 'TypedDict "ItemRecord" has no key "titel"' in wrong, wrong
    right, status = _mypy(tmp_path, 'def title(r: ItemRecord) -> str:\n    return r["title"]\n')
    assert status == 0, right
