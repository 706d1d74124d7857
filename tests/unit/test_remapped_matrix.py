"""A scope mapped from its snapshot that outgrows the snapshot's spare rows moves into a new file beside it, mapped
as the snapshot was, instead of a copy of its matrix in memory (1.5 GB at 1M rows, issue 28 goal 3); its answers
are unchanged, its int8 copy still serves, and nothing is left on disk."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ctxstore.adapters.local import remapped_matrix, vector_cache, vector_snapshot
from ctxstore.adapters.local import sqlite_search_index as ssi
from ctxstore.adapters.local.mapped_rows import mapped_file
from ctxstore.adapters.local.quantized_rows import QuantizedRows
from ctxstore.adapters.local.vector_cache import VectorScope
from ctxstore.ports.search_index import ChunkDoc, SearchFilter
from tests.unit.test_ann_lane import _resident_kb

KEY = ("org", "db", "knowledge")
ALL = SearchFilter(database="db", collections=[], store="knowledge")
Vectors = npt.NDArray[np.float32]


def _unit(seed: int, n: int, dim: int) -> Vectors:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _docs(vecs: Vectors, start: int) -> list[ChunkDoc]:
    return [
        ChunkDoc(f"c{i}#0", f"c{i}", "db", f"col{i % 3}", "knowledge", f"text {i}", vecs[i - start])
        for i in range(start, start + len(vecs))
    ]


def _answers(index: ssi.SqliteSearchIndex, queries: Vectors) -> list[list[tuple[str, float]]]:
    return [[(h.chunk_id, round(h.score, 5)) for h in index.vector_search("org", ALL, q, limit=30)] for q in queries]


def test_a_scope_past_its_snapshots_spare_rows_stays_mapped_and_answers_the_same(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    vecs = _unit(1, 4_000, 8)
    index = ssi.SqliteSearchIndex(path)
    index.ensure_database("org", "db")
    index.upsert("org", _docs(vecs[:300], 0))
    index.vector_search("org", ALL, vecs[0], limit=5)
    index.close()  # saved: 300 rows and 1,024 spare

    index = ssi.SqliteSearchIndex(path)
    queries = _unit(2, 6, 8)
    index.vector_search("org", ALL, queries[0], limit=5)  # mapped from the snapshot
    snapshot_file = mapped_file(index._vectors[KEY].mat)
    assert snapshot_file is not None
    for start in range(300, 4_000, 500):  # past the spare rows, then past the grown file's room too
        index.upsert("org", _docs(vecs[start : start + 500], start))
        scope = index._vectors[KEY]
        assert mapped_file(scope.mat) is not None, "the matrix was copied into memory"
        assert scope.file_rows is not None
    assert mapped_file(index._vectors[KEY].mat) != snapshot_file
    got = _answers(index, queries)
    assert not list(path.parent.glob("search.db.vectors/" + remapped_matrix.PREFIX + "*"))  # unlinked once mapped
    index.close()

    fresh = ssi.SqliteSearchIndex(path)  # the same rows read again (the snapshot the close saved)
    assert _answers(fresh, queries) == got
    assert all(len(hits) == 30 for hits in got)
    fresh.close()


def _mapped_scope(tmp_path: Path, rows: Vectors, room: int) -> VectorScope:
    n, dim = rows.shape
    file = tmp_path / "scope.mat.npy"
    np.save(file, np.concatenate([rows, np.zeros((room - n, dim), dtype=np.float32)]))
    mat = np.asarray(np.load(file, mmap_mode="c"))
    return VectorScope(
        generation=1,
        dim=dim,
        mat=mat,
        ids=np.concatenate([np.arange(1, n + 1, dtype=np.int64), np.zeros(room - n, dtype=np.int64)]),
        coll=np.zeros(room, dtype=np.int32),
        alive=np.concatenate([np.ones(n, dtype=np.bool_), np.zeros(room - n, dtype=np.bool_)]),
        n=n,
        coll_codes={"col": 0},
    )


def _rss_anon_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon")


def test_growing_adds_no_copy_of_the_matrix_to_memory_and_keeps_the_int8_copy(tmp_path: Path) -> None:
    rows = _unit(3, 40_000, 384)  # 61 MB of matrix
    scope = _mapped_scope(tmp_path, rows, 40_010)
    reader = scope.file_rows
    assert reader is not None
    copy = QuantizedRows.build(reader)
    reader.quantized = copy
    extra = _unit(4, 20, 384)
    scope.add([(40_001 + i, "col", extra[i]) for i in range(10)])  # into the spare rows (private pages)
    assert scope.file_rows is reader
    before = _rss_anon_kb()
    scope.add([(40_011 + i, "col", extra[10 + i]) for i in range(10)])  # past them: a grow
    assert _rss_anon_kb() - before < 16_384  # the matrix copied into memory would be 61 MB
    assert mapped_file(scope.mat) is not None and scope.file_rows is not None
    assert scope.file_rows.quantized is copy and scope.file_rows.rows == 40_010
    shortlist = np.arange(0, 40_020, 7, dtype=np.int64)
    shortlist = np.union1d(shortlist, np.arange(40_000, 40_020))
    view = scope.view(approximate=False)
    everything = np.concatenate([rows, extra])
    for q in (everything[40_015], everything[12_345], _unit(5, 1, 384)[0]):
        ids, scores = vector_cache._rescored(view, q, shortlist, 10)
        exact = everything[shortlist] @ q
        assert list(ids) == list(shortlist[np.argsort(-exact)[:10]] + 1)
        assert np.allclose(scores, np.sort(exact)[::-1][:10], atol=1e-5)


def test_without_copy_file_range_the_rows_are_copied_in_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    monkeypatch.setattr(remapped_matrix, "COPY_BLOCK_ROWS", 333)  # blocks that do not divide the rows
    rows = _unit(6, 2_000, 16)
    scope = _mapped_scope(tmp_path, rows, 2_005)
    extra = _unit(7, 9, 16)
    scope.add([(2_001 + i, "col", extra[i]) for i in range(9)])
    assert mapped_file(scope.mat) is not None
    assert np.array_equal(scope.mat[: scope.n], np.concatenate([rows, extra]))


def test_with_no_file_to_grow_into_the_matrix_is_copied_into_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    rows = _unit(8, 500, 16)
    scope = _mapped_scope(tmp_path, rows, 501)
    extra = _unit(9, 3, 16)
    scope.add([(501 + i, "col", extra[i]) for i in range(3)])
    assert mapped_file(scope.mat) is None and scope.file_rows is None
    assert np.array_equal(scope.mat[: scope.n], np.concatenate([rows, extra]))


def test_a_file_a_crash_left_while_growing_is_removed_at_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    folder = path.parent / "search.db.vectors"
    folder.mkdir()
    left = folder / (remapped_matrix.PREFIX + "abc.mat.npy")
    left.write_bytes(b"\0" * 4096)
    ssi.SqliteSearchIndex(path).close()
    assert not left.exists()


def test_a_compaction_writes_the_live_rows_into_a_new_file_not_into_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks of 3 MB: the allocator may keep a freed block's pages (18 MB of 48 MB blocks after other tests).
    monkeypatch.setattr(remapped_matrix, "COPY_BLOCK_ROWS", 2_048)
    rows = _unit(10, 40_000, 384)
    scope = _mapped_scope(tmp_path, rows, 40_100)
    extra = _unit(11, 50, 384)
    scope.add([(40_001 + i, "col", extra[i]) for i in range(50)])  # rows past the file, in private pages
    everything = np.concatenate([rows, extra])
    gone = np.random.default_rng(12).choice(40_050, 12_000, replace=False) + 1  # rowids; a quarter and more
    before = _rss_anon_kb()
    scope.remove(gone.tolist())
    assert _rss_anon_kb() - before < 16_384  # the live rows copied into memory would be 43 MB
    kept_ids = np.setdiff1d(np.arange(1, 40_051), gone)
    assert scope.dead == 0 and scope.n == kept_ids.size  # compacted
    assert mapped_file(scope.mat) is not None and scope.file_rows is not None
    assert np.array_equal(scope.ids[: scope.n], kept_ids)
    assert np.array_equal(scope.mat[: scope.n], everything[kept_ids - 1])
    assert np.array_equal(scope.file_rows.take(np.arange(0, scope.n, 97)), everything[kept_ids[::97] - 1])
    more = _unit(13, 5, 384)  # and it grows again from there
    scope.add([(50_001 + i, "col", more[i]) for i in range(5)])
    assert mapped_file(scope.mat) is not None
    assert np.array_equal(scope.mat[scope.n - 5 : scope.n], more)


def test_a_save_of_a_mapped_scope_reads_its_file_without_mapping_it(tmp_path: Path) -> None:
    """A periodic save read the matrix through the mapping, and left all of it resident (1.5 GB at 1M)."""
    rows = _unit(14, 40_000, 384)
    scope = _mapped_scope(tmp_path, rows, 40_100)
    extra = _unit(15, 30, 384)
    scope.add([(40_001 + i, "col", extra[i]) for i in range(30)])  # in the file's spare rows
    scope.remove([5, 77, 40_003])
    before = _resident_kb("scope.mat.npy")
    vector_snapshot.save(tmp_path / "saved", KEY, scope)
    assert _resident_kb("scope.mat.npy") - before < 2_048  # through the mapping: the whole 61 MB file
    back = vector_snapshot.load(tmp_path / "saved", KEY)
    assert back is not None and back.n == 40_027
    live = np.setdiff1d(np.arange(1, 40_031), [5, 77, 40_003])
    assert np.array_equal(back.ids[: back.n], live)
    assert np.array_equal(back.mat[: back.n], np.concatenate([rows, extra])[live - 1])
