"""A shortlist larger than pread serves (a query into 100 collections of a 1M scope: 5,000 rows) is narrowed on an
int8 copy of the snapshot file's rows, so the file stays out of the resident set (it grew ~100 MB a query through
the mapping, to 1.7 GB), and the rows returned and their exact scores are those of the exact rescoring."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ctxstore.adapters.local import quantized_rows, vector_cache
from ctxstore.adapters.local import sqlite_search_index as ssi
from ctxstore.adapters.local.mapped_rows import PREAD_MAX_ROWS, FileRows
from ctxstore.adapters.local.quantized_rows import QuantizedRows
from ctxstore.adapters.local.vector_cache import ScopeView
from ctxstore.ports.search_index import ChunkDoc, SearchFilter
from tests.unit.test_ann_lane import _resident_kb

ROWS, DIM = 24_000, 384
Vectors = npt.NDArray[np.float32]


def _unit_rows(seed: int, n: int) -> Vectors:
    rows = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _mapped(tmp_path: Path, rows: Vectors) -> Vectors:
    path = tmp_path / "scope-1.mat.npy"
    np.save(path, rows)
    return np.asarray(np.load(path, mmap_mode="c"))  # as a vector snapshot is mapped (vector_snapshot.py)


def test_the_int8_copy_read_in_blocks_scores_within_a_hundredth_of_the_exact_product(tmp_path: Path) -> None:
    rows = _unit_rows(1, 5_000)
    reader = FileRows.of(_mapped(tmp_path, rows), len(rows))
    assert reader is not None
    copy = QuantizedRows.build(reader, block_rows=1_234)  # blocks that do not divide the rows
    assert copy.codes.shape == rows.shape and copy.codes.dtype == np.int8
    queries = _unit_rows(2, 20)
    at = np.arange(0, len(rows), 3)
    for q in queries:
        assert np.abs(copy.scores(at, q) - rows[at] @ q).max() < 0.01


def _view(mat: Vectors, n: int) -> ScopeView:
    return ScopeView(
        mat=mat,
        ids=np.arange(1, n + 1, dtype=np.int64),
        coll=np.zeros(n, dtype=np.int32),
        alive=np.ones(n, dtype=np.bool_),
        codes=None,
        center=None,
        file_rows=FileRows.of(mat, n),
    )


def test_a_large_shortlist_is_narrowed_on_the_copy_leaves_the_file_unmapped_and_answers_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _unit_rows(3, ROWS)
    view = _view(_mapped(tmp_path, rows), ROWS)
    reader = view.file_rows
    assert reader is not None
    rng = np.random.default_rng(4)
    k = 28  # a `fast` query's 10 results
    go = threading.Event()
    build = QuantizedRows.build

    def held_build(reader: FileRows, block_rows: int = quantized_rows.BLOCK_ROWS) -> QuantizedRows:
        assert go.wait(30)  # the copy is being built while the first shortlists arrive
        return build(reader, block_rows)

    monkeypatch.setattr(QuantizedRows, "build", held_build)
    monkeypatch.setattr(quantized_rows, "MIN_ROWS", 10_000)  # the path of 1M-row files, on a 37 MB one

    def check(q: Vectors) -> None:
        shortlist = np.sort(rng.choice(ROWS, 5_000, replace=False)).astype(np.int64)
        assert shortlist.size > PREAD_MAX_ROWS
        ids, scores = vector_cache._rescored(view, q, shortlist, k)
        exact = rows[shortlist] @ q
        best = shortlist[np.argsort(-exact)[:k]]
        assert list(ids) == list(best + 1)
        assert np.allclose(scores, np.sort(exact)[::-1][:k], atol=1e-5)

    queries = _unit_rows(5, 40)
    before = _resident_kb("scope-1.mat.npy")
    for q in queries[:10]:  # while the copy is built: read by pread, all of them
        check(q)
    assert reader.quantized == quantized_rows.BUILDING
    assert _resident_kb("scope-1.mat.npy") - before < 512  # (the copy's release would hide pages mapped here)
    go.set()
    deadline = time.monotonic() + 30
    while not isinstance(reader.quantized, QuantizedRows) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(reader.quantized, QuantizedRows)
    for q in queries[10:]:  # narrowed on the copy
        check(q)
    grown = _resident_kb("scope-1.mat.npy") - before
    assert grown < 512, grown  # through the mapping, 20 shortlists of 5,000 map more than 8 MB of this file


def test_without_the_copy_the_same_shortlists_map_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The measure above means something: the mapping path grows the resident set by most of the file."""
    rows = _unit_rows(6, ROWS)
    view = _view(_mapped(tmp_path, rows), ROWS)
    assert view.file_rows is not None
    monkeypatch.setattr(quantized_rows, "MIN_ROWS", 10_000)
    view.file_rows.quantized = "failed"  # as when the copy could not be built: the mapping serves
    rng = np.random.default_rng(7)
    before = _resident_kb("scope-1.mat.npy")
    for q in _unit_rows(8, 20):
        vector_cache._rescored(view, q, np.sort(rng.choice(ROWS, 5_000, replace=False)).astype(np.int64), 28)
    assert _resident_kb("scope-1.mat.npy") - before > 8_192


def test_rows_added_since_the_file_are_kept_beside_the_narrowed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantized_rows, "MIN_ROWS", 1_000)
    rows = _unit_rows(9, 3_000)
    copy = QuantizedRows(codes=np.zeros((2_000, DIM), dtype=np.int8), scale=np.ones(DIM, dtype=np.float32))
    positions = np.arange(3_000, dtype=np.int64)

    class Ready:  # a reader whose copy is built and whose pages were released
        quantized, released, rows = copy, True, 2_000

    kept = quantized_rows.narrowed(Ready(), rows, rows[0], positions, 10)  # type: ignore[arg-type]
    assert kept.size == quantized_rows.KEEP_MIN + 1_000
    assert set(range(2_000, 3_000)) <= set(kept.tolist())


def test_files_under_the_size_keep_the_mapping_and_build_no_copy(tmp_path: Path) -> None:
    rows = _unit_rows(10, ROWS)
    view = _view(_mapped(tmp_path, rows), ROWS)
    assert view.file_rows is not None and ROWS < quantized_rows.MIN_ROWS
    shortlist = np.arange(0, ROWS, 4, dtype=np.int64)
    ids, _ = vector_cache._rescored(view, rows[8], shortlist, 28)
    assert ids[0] == 9 and view.file_rows.quantized is None  # row 8, id 9


def test_deletes_and_re_ingests_are_seen_by_the_next_search_narrowed_on_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the index: a scope mapped from its snapshot, searched into a third of its collections with
    shortlists past what pread serves, answers from the int8 path, and a delete, a new item and a re-ingested one
    are seen by the very next search (issue 28 goal 5 on the path of 100 collections of a 1M scope)."""
    monkeypatch.setattr(vector_cache, "PREAD_MAX_ROWS", 50)
    monkeypatch.setattr(quantized_rows, "MIN_ROWS", 100)
    monkeypatch.setattr(quantized_rows, "KEEP_MIN", 16)
    narrowings: list[int] = []
    narrowed = quantized_rows.narrowed

    def counted(*args: object, **kwargs: object) -> npt.NDArray[np.int64]:
        out = narrowed(*args, **kwargs)  # type: ignore[arg-type]
        narrowings.append(int(out.size))
        return out

    monkeypatch.setattr(vector_cache, "narrowed", counted)
    dim, n = 16, 3_000
    vecs = np.random.default_rng(11).standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)

    def doc(item: str, i: int, vec: Vectors) -> ChunkDoc:
        return ChunkDoc(f"{item}#0", item, "db", f"col{i % 30}", "knowledge", f"text {item}", vec)

    opts = {"approx_min_rows": 100, "shortlist_min": 300}
    writer = ssi.SqliteSearchIndex(tmp_path / "search.db", **opts)  # type: ignore[arg-type]
    writer.ensure_database("org", "db")
    writer.upsert("org", [doc(f"i{i}", i, vecs[i]) for i in range(n)])
    flt = SearchFilter(database="db", collections=[f"col{c}" for c in range(10)], store="knowledge")
    writer.vector_search("org", flt, vecs[0], limit=10)  # the scope cached, so the close saves its snapshot
    writer.close()

    index = ssi.SqliteSearchIndex(tmp_path / "search.db", **opts)  # type: ignore[arg-type]
    index.vector_search("org", flt, vecs[0], limit=10)  # starts the copy's build
    scope = index._scope(("org", "db", "knowledge"))
    assert scope is not None and scope.file_rows is not None and scope.file_rows.rows == n
    deadline = time.monotonic() + 30
    while not isinstance(scope.file_rows.quantized, QuantizedRows) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(scope.file_rows.quantized, QuantizedRows)

    def top(query: Vectors) -> list[str]:
        return [h.item_id for h in index.vector_search("org", flt, query, limit=10)]

    narrowings.clear()
    assert top(vecs[30])[0] == "i30"  # in col0: a row of the file, found through the copy
    assert narrowings and 0 < narrowings[-1] < 300  # the shortlist was narrowed, not rescored whole
    index.delete_item("org", "db", "col0", "knowledge", "i30")
    assert "i30" not in top(vecs[30])
    fresh = vecs[31] + 0.01 * vecs[32]
    index.upsert("org", [doc("new", 0, (fresh / np.linalg.norm(fresh)).astype(np.float32))])
    assert top(vecs[31])[:2] in (["i31", "new"], ["new", "i31"])
    index.upsert("org", [doc("i60", 60, vecs[35])])  # re-ingested with another text: its old row goes
    assert top(vecs[35])[:2] in (["i35", "i60"], ["i60", "i35"])
    assert "i60" not in top(vecs[60])[:1]
    assert len(narrowings) >= 5
    index.close()
