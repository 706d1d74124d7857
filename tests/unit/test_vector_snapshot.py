"""A clean close saves each cached scope's vectors; the next open reads them back instead of every SQLite row,
and only while they are current: a write since, a crash before the close or a damaged file means SQLite again."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from ctxstore.adapters.local import sqlite_search_index as ssi
from ctxstore.adapters.local import vector_snapshot, vector_snapshot_keeper
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

KEY = ("org", "db", "knowledge")
ALL = SearchFilter(database="db", collections=[], store="knowledge")
COL2 = SearchFilter(database="db", collections=["col2"], store="knowledge")


def _docs(rng: np.random.Generator, start: int, n: int) -> list[ChunkDoc]:
    vecs = rng.normal(size=(n, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [
        ChunkDoc(f"c{i}#0", f"c{i}", "db", f"col{i % 3}", "knowledge", f"text {i}", vecs[i - start])
        for i in range(start, start + n)
    ]


def _answers(index: ssi.SqliteSearchIndex, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    return [
        [(h.chunk_id, h.score) for h in index.vector_search("org", f, q, limit=15)]
        for f in (ALL, COL2)
        for q in queries
    ]


def _written(tmp_path: Path) -> tuple[list[list[tuple[str, float]]], np.ndarray]:
    rng = np.random.default_rng(9)
    writer = ssi.SqliteSearchIndex(tmp_path / "search.db")
    writer.ensure_database("org", "db")
    writer.upsert("org", _docs(rng, 0, 600))
    writer.delete_item("org", "db", "col1", "knowledge", "c10")
    queries = rng.normal(size=(10, 8)).astype(np.float32)
    expected = _answers(writer, queries)  # loads the scope into the cache
    writer.close()
    return expected, queries


def test_a_clean_close_saves_the_scope_and_the_next_open_reads_it_back(tmp_path: Path) -> None:
    expected, queries = _written(tmp_path)
    folder = tmp_path / "search.db.vectors"
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    snapshot = vector_snapshot.load(folder, KEY, reader._generation(KEY))
    assert snapshot is not None and snapshot.n == 599  # the deleted row is not in it
    assert _answers(reader, queries) == expected
    assert all("c10#0" not in {cid for cid, _ in hits} for hits in _answers(reader, queries))
    reader.close()


def test_a_write_since_the_snapshot_is_seen(tmp_path: Path) -> None:
    _, queries = _written(tmp_path)
    # A process writes and dies before its close (no new snapshot): the saved one is a generation behind.
    crashed = ssi.SqliteSearchIndex(tmp_path / "search.db")
    target = queries[0] / np.linalg.norm(queries[0])
    crashed.upsert("org", [ChunkDoc("new#0", "new", "db", "col2", "knowledge", "new", target.astype(np.float32))])
    crashed.delete_item("org", "db", "col2", "knowledge", "c2")
    crashed._db.close()
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    hits = reader.vector_search("org", ALL, queries[0], limit=600)
    assert hits[0].chunk_id == "new#0"
    assert "c2#0" not in {h.chunk_id for h in hits} and len(hits) == 599
    reader.close()


def test_a_damaged_snapshot_falls_back_to_sqlite(tmp_path: Path) -> None:
    expected, queries = _written(tmp_path)
    [path] = (tmp_path / "search.db.vectors").glob("*.mat.npy")
    path.write_bytes(path.read_bytes()[:100])
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    assert _answers(reader, queries) == expected
    reader.close()


def test_a_large_scope_read_from_sqlite_is_saved_and_mapped_back_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read whole from SQLite (no snapshot), a large scope's matrix sat in anonymous memory until the next start:
    it is saved with its codes and mapped from the file as soon as it is read, with the same answers."""
    monkeypatch.setattr(vector_snapshot_keeper, "DUE_MIN_ROWS", 500)
    expected, queries = _written(tmp_path)
    shutil.rmtree(tmp_path / "search.db.vectors")
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    try:
        assert _answers(reader, queries) == expected
        scope = reader._vectors[KEY]
        assert scope.file_rows is not None and scope.file_rows.rows == 599  # mapped from its file, read by pread
        assert scope.codes is not None and scope.coded == 599  # saved with them: no later pass over every row
        assert vector_snapshot.is_saved(tmp_path / "search.db.vectors", KEY, scope)
    finally:
        reader.close()
    monkeypatch.setattr(vector_snapshot_keeper, "DUE_MIN_ROWS", 5_000)  # a small scope stays as it was read
    shutil.rmtree(tmp_path / "search.db.vectors")
    small = ssi.SqliteSearchIndex(tmp_path / "search.db")
    try:
        assert _answers(small, queries) == expected
        assert small._vectors[KEY].file_rows is None
    finally:
        small.close()


def test_a_read_from_sqlite_during_a_periodic_save_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A periodic save holds the save lock and then waits for the cache lock that a scope's load holds: the load
    must not wait for the save lock (a deadlock). It answers from memory and leaves the save to the saver."""
    monkeypatch.setattr(vector_snapshot_keeper, "DUE_MIN_ROWS", 500)
    monkeypatch.setattr(vector_snapshot_keeper, "DUE_MIN_CHANGES", 100)
    expected, queries = _written(tmp_path)
    shutil.rmtree(tmp_path / "search.db.vectors")
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    answers: list[list[list[tuple[str, float]]]] = []
    reader._snapshot_keeper._saving.acquire()  # a periodic save under way
    try:
        loading = threading.Thread(target=lambda: answers.append(_answers(reader, queries)), daemon=True)
        loading.start()
        loading.join(20)
        assert not loading.is_alive() and answers == [expected]
        assert reader._vectors[KEY].file_rows is None  # still in memory
    finally:
        reader._snapshot_keeper._saving.release()
    try:
        assert reader.save_due_snapshots() == 1  # the saver's turn: read from SQLite, so due
    finally:
        reader.close()


def test_a_scope_read_from_a_snapshot_takes_writes_and_saves_again(tmp_path: Path) -> None:
    _, queries = _written(tmp_path)
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    reader.vector_search("org", ALL, queries[0], limit=5)  # the scope, memory-mapped from the snapshot
    target = (queries[1] / np.linalg.norm(queries[1])).astype(np.float32)
    reader.upsert("org", [ChunkDoc("new#0", "new", "db", "col2", "knowledge", "new", target)])
    reader.delete_item("org", "db", "col0", "knowledge", "c3")
    hits = reader.vector_search("org", ALL, queries[1], limit=600)
    assert hits[0].chunk_id == "new#0" and "c3#0" not in {h.chunk_id for h in hits} and len(hits) == 599
    reader.close()  # replaces the snapshot the scope was mapped from
    assert len(list((tmp_path / "search.db.vectors").glob("*.mat.npy"))) == 1
    again = ssi.SqliteSearchIndex(tmp_path / "search.db")
    assert [(h.chunk_id, h.score) for h in again.vector_search("org", ALL, queries[1], limit=600)] == [
        (h.chunk_id, h.score) for h in hits
    ]
    again.close()


def test_the_shortlist_codes_come_back_with_the_scope(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    writer = ssi.SqliteSearchIndex(tmp_path / "search.db", approx_min_rows=100, shortlist_min=50)
    writer.ensure_database("org", "db")
    writer.upsert("org", _docs(rng, 0, 600))
    queries = rng.normal(size=(10, 8)).astype(np.float32)
    expected = _answers(writer, queries)  # approximate: the codes are made on the first search
    writer.close()
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db", approx_min_rows=100, shortlist_min=50)
    snapshot = vector_snapshot.load(tmp_path / "search.db.vectors", KEY, reader._generation(KEY))
    assert snapshot is not None and snapshot.codes is not None and snapshot.coded == 600
    assert _answers(reader, queries) == expected
    reader.close()


def test_rows_added_after_the_last_search_are_coded_before_a_save(tmp_path: Path) -> None:
    """Writes after the last query (a backlog finishing before a stop) left the codes short of the rows, so the
    snapshot kept none and the next start encoded every row again before its first answer."""
    rng = np.random.default_rng(5)
    writer = ssi.SqliteSearchIndex(tmp_path / "search.db", approx_min_rows=100, shortlist_min=50)
    writer.ensure_database("org", "db")
    writer.upsert("org", _docs(rng, 0, 600))
    queries = rng.normal(size=(10, 8)).astype(np.float32)
    _answers(writer, queries)  # the codes are made for the first 600 rows
    writer.upsert("org", _docs(rng, 600, 40))  # no search after these
    writer.close()
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db", approx_min_rows=100, shortlist_min=50)
    snapshot = vector_snapshot.load(tmp_path / "search.db.vectors", KEY, reader._generation(KEY))
    assert snapshot is not None and snapshot.codes is not None and snapshot.coded == 640
    got = _answers(reader, queries)
    reader.close()
    shutil.rmtree(tmp_path / "search.db.vectors")  # the same rows read from SQLite, encoded afresh
    fresh = ssi.SqliteSearchIndex(tmp_path / "search.db", approx_min_rows=100, shortlist_min=50)
    assert got == _answers(fresh, queries)
    fresh.close()


def test_an_unchanged_scope_is_not_saved_again(tmp_path: Path) -> None:
    _, queries = _written(tmp_path)
    [mat] = (tmp_path / "search.db.vectors").glob("*.mat.npy")
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    _answers(reader, queries)
    reader.close()
    assert list((tmp_path / "search.db.vectors").glob("*.mat.npy")) == [mat]  # the same file: nothing rewritten
    writer = ssi.SqliteSearchIndex(tmp_path / "search.db")
    _answers(writer, queries)
    writer.delete_item("org", "db", "col2", "knowledge", "c5")
    writer.close()
    assert list((tmp_path / "search.db.vectors").glob("*.mat.npy")) != [mat]  # a write since: saved anew


_WRITE_IN_A_FRESH_PROCESS = """
import sys
from pathlib import Path
import numpy as np
from ctxstore.adapters.local import vector_snapshot
def hwm_mb():
    return next(int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
mat = np.empty((150_000, 384), dtype=np.float32)  # 230 MB, filled without a float64 temporary
for s in range(0, 150_000, 10_000):
    mat[s : s + 10_000] = np.random.default_rng(s).random((10_000, 384), dtype=np.float32)
before = hwm_mb()
vector_snapshot._write_matrix(Path(sys.argv[1]) / "m.mat.npy", mat, np.arange(150_000))
print(hwm_mb() - before)  # before reading it back (a read maps it)
back = np.load(Path(sys.argv[1]) / "m.mat.npy", mmap_mode="r")
assert back.shape == (150_000 + vector_snapshot.spare_rows(150_000), 384)
assert np.array_equal(back[:150_000], mat) and not back[150_000:].any()
"""


def test_writing_a_snapshot_adds_no_copy_of_the_matrix_to_the_resident_memory(tmp_path: Path) -> None:
    """A writable memory map of the file held every written page in the process's resident set until the end:
    a 1M scope's save added 1.5 GB to the server's peak (a first start at 1M peaked at 3.7 GB)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _WRITE_IN_A_FRESH_PROCESS, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert int(done.stdout.strip().splitlines()[0]) < 64, done.stdout  # MB; the memory map added ~290
