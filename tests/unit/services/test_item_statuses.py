"""ItemService.set_statuses: several items moved in one conditional write, item by item when one changed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxstore.domain.items import GRAPH_CREATION, QUEUED, ItemRef
from ctxstore.services.items.service import StatusChange
from tests.support.app import LocalApp, make_app

DB = "d"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "data")
    la.create_ready_database(DB)
    notes = [{"id": i, "title": i, "type": "note", "content": {"text": f"Note {i}."}} for i in ("a", "b")]
    r = la.client.post(
        "/context/ingest", data={"database": DB, "app_knowledge": json.dumps(notes)}, headers=la.headers()
    )
    assert r.status_code == 202
    yield la
    la.close()


def _state(app: LocalApp, org: str, item_id: str) -> tuple[str, str, int]:
    rec = app.services.items.get(org, ItemRef(DB, "", "knowledge", item_id))
    assert rec is not None
    return str(rec.data["status"]), str(rec.data["version"]), int(rec.data.get("chunk_count") or 0)


def test_statuses_move_together_and_a_replaced_item_is_left_alone(app: LocalApp) -> None:
    org = app.services.keys.authenticate(app.key).org
    items = app.services.items
    (_, va, _), (_, vb, _) = _state(app, org, "a"), _state(app, org, "b")
    a, b = ItemRef(DB, "", "knowledge", "a"), ItemRef(DB, "", "knowledge", "b")
    moved = items.set_statuses(
        org, [StatusChange(a, va, GRAPH_CREATION, {"chunk_count": 2}), StatusChange(b, vb, GRAPH_CREATION)]
    )
    assert moved == [True, True]
    assert _state(app, org, "a") == (GRAPH_CREATION, va, 2) and _state(app, org, "b")[0] == GRAPH_CREATION
    # b's change names a version it no longer has (a newer ingest replaced it): only a moves.
    moved = items.set_statuses(org, [StatusChange(a, va, QUEUED), StatusChange(b, "0-stale", QUEUED)])
    assert moved == [True, False]
    assert _state(app, org, "a")[0] == QUEUED and _state(app, org, "b")[0] == GRAPH_CREATION
