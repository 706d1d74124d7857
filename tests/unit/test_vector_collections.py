"""Queries into some collections of a large vector scope (issue 28 goal 7: 1,000 collections of 1,000 chunks).

The scope is one (org, database, store); a query into a few of its collections reads those collections' rows
(VectorScope.collection_rows) and, on the coded lane, computes code distances over those rows only. The
answers must be the ones a test of every row's collection gives.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ctxstore.adapters.local import vector_cache
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.adapters.local.vector_cache import VectorScope, hamming, nearest, shortlist_size, sign_codes
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

Vectors = npt.NDArray[np.float32]
ORG, DB = "org1", "db1"


def _unit(rng: np.random.Generator, n: int, dim: int = 32) -> Vectors:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    unit: Vectors = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def _expected_rows(scope: VectorScope, codes: list[int]) -> list[int]:
    return np.flatnonzero(np.isin(scope.coll[: scope.n], codes)).tolist()


def test_collection_rows_follow_appends_new_collections_and_compaction() -> None:
    rng = np.random.default_rng(1)
    scope = VectorScope.empty(0, 32)
    vecs = _unit(rng, 12_000)
    names = rng.integers(0, 40, size=12_000)
    scope.add([(i + 1, f"c{names[i]}", vecs[i]) for i in range(8_000)])
    codes = [scope.coll_codes[c] for c in ("c3", "c17")]
    assert sorted(scope.collection_rows(codes).tolist()) == _expected_rows(scope, codes)  # grouped now
    # A short tail (scanned) with a collection the grouping has not seen, then a long one (regrouped).
    scope.add([(9_000 + i, "new", vecs[8_000 + i]) for i in range(100)])
    with_new = [*codes, scope.coll_codes["new"]]
    assert sorted(scope.collection_rows(with_new).tolist()) == _expected_rows(scope, with_new)
    assert scope.grouped == 8_000
    scope.add([(20_000 + i, f"c{names[i]}", vecs[i]) for i in range(8_100, 12_000)])
    assert sorted(scope.collection_rows(with_new).tolist()) == _expected_rows(scope, with_new)
    assert scope.grouped == scope.n
    scope.remove(range(1, 4_001))  # past a quarter dead: compacts, positions move
    assert scope.by_coll is None
    got = scope.collection_rows(with_new)
    assert sorted(got.tolist()) == _expected_rows(scope, with_new)
    assert set(scope.ids[got].tolist()).isdisjoint(range(1, 4_001))


def test_the_rows_a_filter_allows_are_computed_once_between_writes_and_again_after_each() -> None:
    """A query's first and feedback searches (and queries between writes) share the mask of allowed rows; an
    add, a delete or a compaction computes it again, so no search sees a deleted row or misses an added one."""
    rng = np.random.default_rng(4)
    scope = VectorScope.empty(0, 32)
    vecs = _unit(rng, 3_000)
    scope.add([(i + 1, f"c{i % 3}", vecs[i]) for i in range(2_000)])
    c1 = [scope.coll_codes["c1"]]

    def expected(codes: list[int] | None) -> list[int]:
        alive = scope.alive[: scope.n]
        rows = alive if codes is None else alive & np.isin(scope.coll[: scope.n], codes)
        return np.flatnonzero(rows).tolist()

    first = scope.view(approximate=False, collections=c1).alive
    assert scope.view(approximate=False, collections=c1).alive is first  # the same mask, not computed again
    assert not first.flags.writeable and np.flatnonzero(first).tolist() == expected(c1)
    for write in (
        lambda: scope.remove([2, 5, 8]),  # rows of c1
        lambda: scope.add([(5_000, "c1", vecs[2_000])]),
        lambda: scope.add_block(np.asarray([5_001], dtype=np.int64), ["c1"], vecs[2_001:2_002]),
        lambda: scope.remove(range(1, 1_200)),  # past a quarter dead: compacts
    ):
        before = scope.view(approximate=False, collections=c1).alive
        write()
        after = scope.view(approximate=False, collections=c1).alive
        assert after is not before and np.flatnonzero(after).tolist() == expected(c1)
        assert np.flatnonzero(scope.view(approximate=False).alive).tolist() == expected(None)


def test_collection_mask_is_the_same_whether_it_scatters_rows_or_compares_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A small collection scatters its rows, a large one compares every row's code: both give alive & in-codes,
    with dead rows and an ungrouped tail, and a large collection never builds its list of rows."""
    rng = np.random.default_rng(4)
    scope = VectorScope.empty(0, 32, capacity=20_000)
    names = ["big" if i % 10 else f"small{i % 7}" for i in range(16_000)]
    scope.add_block(np.arange(1, 16_001, dtype=np.int64), names, _unit(rng, 16_000))
    scope.remove(range(1, 16_001, 13))
    scope.add([(20_000 + i, "big" if i % 2 else "small1", v) for i, v in enumerate(_unit(rng, 300))])  # tail
    alive = scope.alive[: scope.n].copy()
    built: list[int] = []
    inner = VectorScope.collection_rows

    def spy(self: VectorScope, codes: list[int]) -> npt.NDArray[np.intp]:
        built.append(len(codes))
        return inner(self, codes)

    monkeypatch.setattr(VectorScope, "collection_rows", spy)
    for names_wanted, scatters in (
        (["small1"], True),
        (["small1", "small3"], True),
        (["big"], False),
        (["big", "small2"], False),
    ):
        codes = sorted(scope.coll_codes[c] for c in names_wanted)
        built.clear()
        got = scope.collection_mask(codes, alive)
        assert got.tolist() == (alive & np.isin(scope.coll[: scope.n], codes)).tolist()
        assert bool(built) is scatters
    assert scope.collection_mask([], alive).sum() == 0


def test_coded_lane_measures_distances_over_the_collections_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 collections of a 1,000-collection scope: the codes of their rows, not of every row, same answer."""
    rng = np.random.default_rng(2)
    rows = _unit(rng, 50_000)
    scope = VectorScope.empty(0, 32, capacity=50_000)
    scope.add_block(np.arange(1, 50_001, dtype=np.int64), [f"c{i % 1000}" for i in range(50_000)], rows)
    view = scope.view(approximate=True)
    assert view.codes is not None and view.center is not None
    codes = [scope.coll_codes[f"c{i}"] for i in range(0, 1000, 10)]
    mask = np.zeros(scope.n, dtype=np.bool_)
    mask[scope.collection_rows(codes)] = True
    measured: list[int] = []
    inner = vector_cache.hamming

    def spy(c: vector_cache.Codes, q: vector_cache.Codes) -> npt.NDArray[np.uint16]:
        measured.append(c.shape[1])
        return inner(c, q)

    monkeypatch.setattr(vector_cache, "hamming", spy)
    k = 28
    query = rows[123]
    got, scores = nearest(view, query, mask.copy(), k, approx_min_rows=1000, shortlist_min=0)
    assert measured == [int(mask.sum())]  # 5,000 rows' codes, not 50,000
    # The answer of a pass over every row's code with the other collections pushed past any distance.
    dist = hamming(view.codes, sign_codes(query.reshape(1, -1), view.center))
    far = view.codes.shape[0] * 64 + 1
    dist[~mask] = far
    cutoff = int(np.searchsorted(np.cumsum(np.bincount(dist, minlength=far + 1)), shortlist_size(5_000, k, 0)))
    shortlist = np.flatnonzero(dist <= cutoff)
    best = shortlist[np.argsort(-(rows[shortlist] @ query), kind="stable")[:k]]
    assert got.tolist() == (best + 1).tolist()
    assert np.allclose(scores, rows[best] @ query, atol=1e-6)


def test_index_query_into_many_collections_matches_an_exact_pass(tmp_path: Path) -> None:
    """The index's answer into 20 of 60 collections, after updates, deletes and a new collection, is the
    exact top-k over those collections' live rows."""
    rng = np.random.default_rng(3)
    vecs = _unit(rng, 3_200)
    index = SqliteSearchIndex(tmp_path / "search.db")
    try:
        index.ensure_database(ORG, DB)
        docs = [ChunkDoc(f"k{i}", f"i{i}", DB, f"c{i % 60}", "knowledge", f"t{i}", vecs[i]) for i in range(3_000)]
        index.upsert(ORG, docs)
        wanted = [f"c{i}" for i in range(0, 60, 3)] + ["late"]
        flt = SearchFilter(database=DB, collections=wanted, store="knowledge")
        query = vecs[7]
        assert index.vector_search(ORG, flt, query, limit=5)  # groups the rows
        index.upsert(
            ORG, [ChunkDoc(f"k{i}", f"i{i}", DB, "late", "knowledge", "t", vecs[i]) for i in range(3_000, 3_200)]
        )
        index.delete_item(ORG, DB, "c0", "knowledge", "i0")
        live = {i: f"c{i % 60}" for i in range(1, 3_000)} | {i: "late" for i in range(3_000, 3_200)}
        inside = np.array([i for i, c in live.items() if c in wanted])
        exact = inside[np.argsort(-(vecs[inside] @ query), kind="stable")[:50]]
        got = index.vector_search(ORG, flt, query, limit=50)
        assert [h.chunk_id for h in got] == [f"k{i}" for i in exact]
    finally:
        index.close()
