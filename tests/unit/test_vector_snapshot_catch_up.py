"""Snapshots between stops: a large scope that changed enough is saved while the index runs, and a start after a
crash catches the newest snapshot up with SQLite (only the rows written or deleted since) instead of reading
every vector again."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from ctxstore.adapters.local import sqlite_search_index as ssi
from ctxstore.adapters.local import vector_loading, vector_snapshot, vector_snapshot_keeper
from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

KEY = ("org", "db", "knowledge")
ALL = SearchFilter(database="db", collections=[], store="knowledge")
COL1 = SearchFilter(database="db", collections=["col1"], store="knowledge")


@pytest.fixture(autouse=True)
def small_scopes_are_due(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_snapshot_keeper, "DUE_MIN_ROWS", 100)
    monkeypatch.setattr(vector_snapshot_keeper, "DUE_MIN_CHANGES", 20)


def _docs(rng: np.random.Generator, ids: range, tag: str = "") -> list[ChunkDoc]:
    vecs = rng.normal(size=(len(ids), 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [
        ChunkDoc(f"c{i}#0", f"c{i}", "db", f"col{i % 3}", "knowledge", f"text {i}{tag}", vecs[j])
        for j, i in enumerate(ids)
    ]


def _answers(index: ssi.SqliteSearchIndex, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    return [
        [(h.chunk_id, h.score) for h in index.vector_search("org", f, q, limit=40)]
        for f in (ALL, COL1)
        for q in queries
    ]


def _crash(index: ssi.SqliteSearchIndex) -> None:
    """What `kill -9` leaves: no close, so no snapshot saved at the end."""
    index._snapshot_keeper.stop()
    index._db.close()


def _fresh_answers(path: Path, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    """The same data read from SQLite alone: a copy of the database without the snapshot folder."""
    copy = path.parent / "fresh" / path.name
    copy.parent.mkdir()
    for part in path.parent.glob(path.name + "*"):
        if part.is_file():
            shutil.copy(part, copy.parent / part.name)
    plain = ssi.SqliteSearchIndex(copy)
    assert vector_snapshot.load(plain._snapshots, KEY) is None
    try:
        return _answers(plain, queries)
    finally:
        plain._snapshot_keeper.stop()
        plain._db.close()


def test_a_changed_large_scope_is_saved_while_running_and_only_when_due(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    index = ssi.SqliteSearchIndex(tmp_path / "search.db")
    index.ensure_database("org", "db")
    index.upsert("org", _docs(rng, range(300)))
    index.vector_search("org", ALL, rng.normal(size=8).astype(np.float32), limit=5)  # read from SQLite: saved
    assert vector_snapshot.load(index._snapshots, KEY) is not None  # at once, and mapped back (map_read_scope)
    assert index.save_due_snapshots() == 0  # nothing changed since
    index.upsert("org", _docs(rng, range(300, 310)))
    assert index.save_due_snapshots() == 0  # 10 rows: under the 20 that make a save due
    index.delete_item("org", "db", "col0", "knowledge", "c0")
    index.upsert("org", _docs(rng, range(310, 320)))
    assert index.save_due_snapshots() == 1  # 21 changes
    saved = vector_snapshot.load(index._snapshots, KEY)
    assert saved is not None and saved.n == 319 and 0 not in saved.ids[: saved.n]
    _crash(index)


def test_a_start_after_a_crash_catches_the_snapshot_up(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    path = tmp_path / "search.db"
    index = ssi.SqliteSearchIndex(path)
    index.ensure_database("org", "db")
    index.upsert("org", _docs(rng, range(400)))
    index.vector_search("org", ALL, rng.normal(size=8).astype(np.float32), limit=5)  # saved as it is read
    assert index.save_due_snapshots() == 0
    # After the save: new rows, deletes, and re-ingests (a delete and an insert of the same chunk id).
    index.upsert("org", _docs(rng, range(400, 450)))
    for i in (3, 4, 5, 401):
        index.delete_item("org", "db", f"col{i % 3}", "knowledge", f"c{i}")
    index.upsert("org", _docs(rng, range(10, 30), tag=" again"))
    _crash(index)

    queries = rng.normal(size=(12, 8)).astype(np.float32)
    expected = _fresh_answers(path, queries)
    db = SqliteDb(path)
    loaded = vector_loading.load_scope(db.conn, vector_snapshot.folder_for(path), KEY)
    db.close()
    # Since the snapshot: 49 + 20 rows to add (c401 came and went), 3 + 20 to drop. That is all SQLite gave.
    assert loaded.from_sqlite == 92 and loaded.scope.live == 446
    reopened = ssi.SqliteSearchIndex(path)
    assert _answers(reopened, queries) == expected
    reopened.close()


def test_the_running_index_saves_on_its_own(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    path = tmp_path / "search.db"
    index = ssi.SqliteSearchIndex(path, snapshot_every_s=0.05)
    index.ensure_database("org", "db")
    index.upsert("org", _docs(rng, range(200)))
    index.vector_search("org", ALL, rng.normal(size=8).astype(np.float32), limit=5)
    deadline = time.monotonic() + 10
    while vector_snapshot.load(index._snapshots, KEY) is None:
        assert time.monotonic() < deadline, "no snapshot saved while the index ran"
        time.sleep(0.05)
    index.upsert("org", _docs(rng, range(200, 205)))
    _crash(index)
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    reopened = ssi.SqliteSearchIndex(path)
    assert _answers(reopened, queries) == _fresh_answers(path, queries)
    reopened.close()


def test_rows_added_after_a_start_fill_the_snapshots_spare_rows_in_place(tmp_path: Path) -> None:
    """Not a copy of the whole memory-mapped matrix (1.5 GB at 1M) for the first write after a start."""
    rng = np.random.default_rng(5)
    path = tmp_path / "search.db"
    index = ssi.SqliteSearchIndex(path)
    index.ensure_database("org", "db")
    index.upsert("org", _docs(rng, range(300)))
    index.vector_search("org", ALL, rng.normal(size=8).astype(np.float32), limit=5)
    index.close()
    reader = ssi.SqliteSearchIndex(path)
    query = rng.normal(size=8).astype(np.float32)
    reader.vector_search("org", ALL, query, limit=5)
    mapped = reader._vectors[KEY].mat
    assert mapped.shape[0] == 300 + vector_snapshot.spare_rows(300)
    reader.upsert("org", _docs(rng, range(300, 320)))
    assert reader._vectors[KEY].mat is mapped  # the new rows went into the spare rows
    hits = reader.vector_search("org", ALL, query, limit=320)
    assert len(hits) == 320
    _crash(reader)
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    again = ssi.SqliteSearchIndex(path)
    assert _answers(again, queries) == _fresh_answers(path, queries)
    again.close()
