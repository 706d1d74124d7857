"""POST /context/ingest stores a request's items in groups: one lock write, one job start and one record
write per group instead of several commits per item; a failure part-way leaves nothing of its group behind."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.blobs import BlobPut
from ctxstore.services.items import ingest as ingest_module
from tests.support.app import LocalApp


@pytest.fixture
def db(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme")
    return local


def _items(n: int, prefix: str = "n") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "title": f"Note {i}", "type": "note", "content": {"text": f"Harbour note {i} on tides."}}
        for i in range(n)
    ]


def _ingest(la: LocalApp, items: list[dict[str, Any]], **fields: str) -> Any:
    data = {"database": "acme", "app_knowledge": json.dumps(items), **fields}
    return la.client.post("/context/ingest", data=data, headers=la.headers())


def _statuses(la: LocalApp, ids: list[str]) -> dict[str, str]:
    """Each id's indexing status, or its error code when the service knows no such item."""
    r = la.client.get("/context/status", params={"database": "acme", "ids": ",".join(ids)}, headers=la.headers())
    if r.status_code == 404:
        return dict.fromkeys(ids, r.json()["error"]["code"])
    assert r.status_code == 200, r.text
    return {s["id"]: s["indexing_status"] or s["error_code"] for s in r.json()["data"]["statuses"]}


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQLite write transactions opened while a test runs (database file names), observed, not altered."""
    seen: list[str] = []
    original = SqliteDb.write

    @contextmanager
    def counted(self: SqliteDb) -> Iterator[Any]:
        seen.append(self.path.name)
        with original(self) as conn:
            yield conn

    monkeypatch.setattr(SqliteDb, "write", counted)
    return seen


def _blob_files(la: LocalApp) -> list[Path]:
    return [p for p in la.data_dir.rglob("*") if p.is_file() and "/knowledge/" in p.as_posix()]


def test_a_request_of_100_items_is_stored_in_a_handful_of_writes(db: LocalApp, commits: list[str]) -> None:
    items = _items(100)
    r = _ingest(db, items)
    assert r.status_code == 202, r.text
    assert r.json()["data"]["success_count"] == 100
    # Per group of 50: the locks taken, the jobs queued, the records written, the locks released (item by item
    # this was ~4 commits an item, 400 here).
    assert len(commits) <= 4 * -(-100 // ingest_module.ACCEPT_GROUP) + 2, commits
    assert db.container.queue.pending("ingest") == 100
    assert set(_statuses(db, [i["id"] for i in items]).values()) == {"queued"}
    assert len(_blob_files(db)) == 100
    db.drain()
    assert set(_statuses(db, [i["id"] for i in items]).values()) == {"completed"}


def test_a_re_ingest_in_groups_replaces_every_item_and_drops_the_old_blobs(db: LocalApp) -> None:
    items = _items(60)
    assert _ingest(db, items).status_code == 202
    db.drain()
    again = [dict(i, content={"text": f"Replaced body {n} about gardening."}) for n, i in enumerate(items)]
    r = _ingest(db, again)
    assert r.status_code == 202 and r.json()["data"]["success_count"] == 60
    assert len(_blob_files(db)) == 60  # one blob an item: the new version's
    db.drain()
    assert set(_statuses(db, [i["id"] for i in items]).values()) == {"completed"}
    idx = db.container.search_index
    assert idx is not None
    for n in (0, 49, 50, 59):  # both groups
        [chunk] = idx.item_chunks("default", "acme", "", "knowledge", f"n{n}")
        assert f"Replaced body {n} " in chunk.text and "Harbour" not in chunk.text


def test_a_blob_store_failure_part_way_leaves_nothing_of_its_group(
    db: LocalApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = db.container.blobs
    original = blobs.put_many

    def put_many(org: str, puts: Sequence[BlobPut]) -> None:  # a store that fails part-way: two blobs landed
        original(org, puts[:2])
        raise StoreUnavailable("out of disk space writing a blob", retry_after_s=5)

    monkeypatch.setattr(blobs, "put_many", put_many)
    r = _ingest(db, _items(5))
    assert r.status_code in (503, 507), r.text
    assert _blob_files(db) == []  # the two written before the failure are gone: nothing refers to them
    assert db.container.queue.pending("ingest") == 0
    assert set(_statuses(db, [f"n{i}" for i in range(5)]).values()) == {"FILE_NOT_FOUND"}
    monkeypatch.setattr(blobs, "put_many", original)
    assert _ingest(db, _items(5)).status_code == 202  # the client's retry stores them all
    db.drain()
    assert set(_statuses(db, [f"n{i}" for i in range(5)]).values()) == {"completed"}
