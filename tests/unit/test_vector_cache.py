"""The 1-bit code shortlist of large vector scopes (adapters/local/vector_cache.py) on real MiniLM vectors.

Rows are real embeddings of SciFact titles plus normalised pairwise mixtures of them (the model's own
anisotropy, which is what the centred sign codes have to cope with); queries are real SciFact claims.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ctxstore.adapters.local import vector_cache
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.adapters.local.vector_cache import VectorScope, nearest
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "beir_scifact"
ROWS = 4_000
ORG, DB = "org1", "db1"
Vectors = npt.NDArray[np.float32]


def _jsonl(path: Path, n: int) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f, strict=False)]


@pytest.fixture(scope="module")
def real() -> tuple[Vectors, Vectors]:
    assert SCIFACT.exists(), "../shared/data/beir_scifact is part of the test material (MANIFEST.md)"
    from ctxstore.adapters.models.local_embedder import LocalEmbedder

    embedder = LocalEmbedder()
    titles = [d["title"] for d in _jsonl(SCIFACT / "corpus.jsonl", 400) if d.get("title")]
    queries = [q["text"] for q in _jsonl(SCIFACT / "queries.jsonl", 60)]
    base = embedder.embed_documents(titles)
    rng = np.random.default_rng(5)
    pairs = rng.integers(0, len(base), size=(ROWS - len(base), 2))
    mixed = base[pairs[:, 0]] + rng.uniform(0.2, 1.0, (len(pairs), 1)).astype(np.float32) * base[pairs[:, 1]]
    rows = np.concatenate([base, mixed / np.linalg.norm(mixed, axis=1, keepdims=True)]).astype(np.float32)
    return rows, np.stack([embedder.embed_query(q) for q in queries])


def _scope(rows: Vectors, collections: int = 1) -> VectorScope:
    scope = VectorScope.empty(0, rows.shape[1])
    scope.add([(i + 1, f"c{i % collections}", v) for i, v in enumerate(rows)])
    return scope


@pytest.fixture
def scored_rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many rows each exact scoring pass read (proves the shortlist, not the full scan, ran)."""
    seen: list[int] = []
    inner = vector_cache._scores

    def spy(mat: Vectors, query: Vectors) -> Vectors:
        seen.append(mat.shape[0])
        return inner(mat, query)

    monkeypatch.setattr(vector_cache, "_scores", spy)
    yield seen


def test_shortlist_recall_at_10_on_real_vectors(real: tuple[Vectors, Vectors], scored_rows: list[int]) -> None:
    rows, queries = real
    scope = _scope(rows)
    exact_view, coded_view = scope.view(approximate=False), scope.view(approximate=True)
    recalls = []
    for q in queries:
        exact, _ = nearest(exact_view, q, exact_view.alive.copy(), 28)
        approx, scores = nearest(coded_view, q, coded_view.alive.copy(), 28, approx_min_rows=1000, shortlist_min=0)
        assert np.allclose(scores, rows[approx - 1] @ q, atol=1e-5)  # scores stay exact dot products
        recalls.append(len(set(exact[:10].tolist()) & set(approx[:10].tolist())) / 10)
    assert float(np.mean(recalls)) >= 0.99
    assert max(scored_rows) == ROWS and min(scored_rows) < ROWS // 4  # the coded lane rescored a shortlist only


def test_filtered_rows_never_leave_the_mask(real: tuple[Vectors, Vectors], scored_rows: list[int]) -> None:
    rows, queries = real
    scope = _scope(rows, collections=3)
    view = scope.view(approximate=True)
    mask = view.alive & (view.coll == scope.coll_codes["c1"])
    got, _ = nearest(view, queries[0], mask, 28, approx_min_rows=1000, shortlist_min=0)
    assert len(got) == 28 and all((r - 1) % 3 == 1 for r in got)
    assert scored_rows[-1] < int(mask.sum())


def test_codes_follow_appends_deletes_and_compaction(real: tuple[Vectors, Vectors]) -> None:
    rows, queries = real
    scope = _scope(rows[:3000])
    scope.view(approximate=True)  # codes built at 3,000 rows
    scope.add([(10_000 + i, "c0", v) for i, v in enumerate(rows[3000:])])
    scope.remove(range(1, 1501))  # past a quarter: compacts
    view = scope.view(approximate=True)
    assert view.codes is not None and view.codes.shape[1] == scope.n == ROWS - 1500
    fresh = vector_cache.sign_codes(view.mat, view.center if view.center is not None else view.mat.mean(0))
    assert np.array_equal(view.codes, fresh)
    got, _ = nearest(view, queries[1], view.alive.copy(), 28, approx_min_rows=1000, shortlist_min=0)
    assert not set(got.tolist()) & set(range(1, 1501))


def test_index_reflects_updates_deletes_and_collections_on_the_coded_lane(
    real: tuple[Vectors, Vectors], tmp_path: Path
) -> None:
    rows, queries = real
    index = SqliteSearchIndex(tmp_path / "search.db", approx_min_rows=1000, shortlist_min=0)
    try:
        index.ensure_database(ORG, DB)
        docs = [ChunkDoc(f"k{i}", f"i{i}", DB, f"c{i % 2}", "knowledge", f"text {i}", v) for i, v in enumerate(rows)]
        for start in range(0, len(docs), 1000):
            index.upsert(ORG, docs[start : start + 1000])
        flt = SearchFilter(database=DB, collections=[], store="knowledge")
        q = queries[2]
        first = index.vector_search(ORG, flt, q, limit=10)
        assert [h.chunk_id for h in first] == [f"k{i}" for i in np.argsort(-(rows @ q))[:10]]
        # An update moves a far row to the top; a delete removes the best one.
        worst = int(np.argmin(rows @ q))
        index.upsert(ORG, [ChunkDoc(f"k{worst}", f"i{worst}", DB, f"c{worst % 2}", "knowledge", "moved", q)])
        index.delete_item(ORG, DB, first[0].collection, "knowledge", first[0].item_id)
        after = index.vector_search(ORG, flt, q, limit=10)
        assert after[0].chunk_id == f"k{worst}" and first[0].chunk_id not in {h.chunk_id for h in after}
        c1 = SearchFilter(database=DB, collections=["c1"], store="knowledge")
        only_c1 = index.vector_search(ORG, c1, q, limit=20)
        assert len(only_c1) == 20 and {h.collection for h in only_c1} == {"c1"}
    finally:
        index.close()


def test_a_scope_holds_its_rows_in_arrays_only() -> None:
    """No Python object per row (a rowid -> position dict cost ~100 B a row: ~100 MB at 1M): rows are found
    by a binary search of the ascending rowids, and removes, lookups and compaction still find them."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, dim = 20_000, 384
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    rowids = np.arange(1, 2 * n, 2, dtype=np.int64)  # gaps, as deletes leave them
    tracemalloc.start()
    try:
        scope = VectorScope.empty(0, dim, capacity=n)
        arrays = tracemalloc.get_traced_memory()[0]
        scope.add_block(rowids, ["c"] * n, rows)
        grown = tracemalloc.get_traced_memory()[0] - arrays
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown  # a dict of 20k rowids alone takes > 1 MB

    scope.remove([int(rowids[5]), 4, int(rowids[5])])  # a rowid it never held, one removed twice
    assert (scope.live, scope.dead) == (n - 1, 1)
    assert np.array_equal(scope.rows_of(rowids[[0, 7]]), rows[[0, 7]])
    with pytest.raises(KeyError):
        scope.rows_of(rowids[[5]])  # removed
    scope.remove(rowids[: n // 2].tolist())  # past a quarter dead: compacted
    assert scope.n == n // 2 and scope.dead == 0
    assert np.array_equal(scope.rows_of(rowids[[-1]]), rows[[-1]])


def test_rows_out_of_rowid_order_are_refused() -> None:
    """The binary search needs ascending rowids; the owner reloads a scope whose write would break them."""
    scope = VectorScope.empty(0, 4)
    scope.add([(10, "c", np.ones(4, np.float32))])
    with pytest.raises(ValueError, match="ascending"):
        scope.add([(9, "c", np.ones(4, np.float32))])
    with pytest.raises(ValueError, match="ascending"):
        scope.add_block(np.array([12, 11]), ["c", "c"], np.ones((2, 4), np.float32))
    assert scope.n == 1


def test_encoding_a_scope_holds_no_copy_of_its_matrix() -> None:
    """The center and the codes are computed in place and in blocks: gathering the alive rows for the mean and
    comparing every row at once held 1.25x the matrix again (3.5 GB peak at 1M rows, ann_1m.py's memory step)."""
    import tracemalloc

    rng = np.random.default_rng(1)
    n, dim = 150_000, 384
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    scope = VectorScope.empty(0, dim, capacity=n)
    scope.add_block(np.arange(1, n + 1, dtype=np.int64), ["c"] * n, rows)
    scope.remove(range(1, 1001))  # tombstones: the mean is of the alive rows
    tracemalloc.start()
    try:
        scope.view(approximate=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < rows.nbytes // 4, (peak, rows.nbytes)
    assert scope.center is not None
    assert np.allclose(scope.center, rows[1000:].mean(axis=0), atol=1e-5)
    assert scope.codes is not None and np.array_equal(scope.codes, vector_cache.sign_codes(rows, scope.center))
