"""Vector scopes held in memory are bounded (issue 28 goal 7: memory does not grow per idle scope).

SqliteSearchIndex keeps the least recently used scopes' vectors out past `vector_cache_bytes`, always
keeping the one in use; a dropped scope answers again, the same, once read back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

ORG = "org1"
ROWS, DIM = 300, 32


def _vectors(seed: int) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(seed).standard_normal((ROWS, DIM)).astype(np.float32)
    unit: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def _fill(index: SqliteSearchIndex, databases: int) -> None:
    for d in range(databases):
        db = f"db{d}"
        index.ensure_database(ORG, db)
        vecs = _vectors(d)
        index.upsert(ORG, [ChunkDoc(f"{db}-{i}", f"i{i}", db, "c", "knowledge", "t", vecs[i]) for i in range(ROWS)])


def _top(index: SqliteSearchIndex, d: int) -> list[str]:
    flt = SearchFilter(database=f"db{d}", collections=[], store="knowledge")
    return [h.chunk_id for h in index.vector_search(ORG, flt, _vectors(d)[5], limit=10)]


def _exact(d: int) -> list[str]:
    vecs = _vectors(d)
    return [f"db{d}-{i}" for i in np.argsort(-(vecs @ vecs[5]), kind="stable")[:10]]


def test_touching_many_scopes_keeps_the_cache_within_its_bound(tmp_path: Path) -> None:
    probe = SqliteSearchIndex(tmp_path / "probe.db")
    try:
        _fill(probe, 1)
        _top(probe, 0)
        one = probe.cached_vectors()[1]  # what one scope of these holds
    finally:
        probe.close()
    index = SqliteSearchIndex(tmp_path / "search.db", vector_cache_bytes=3 * one)
    try:
        _fill(index, 12)
        for d in range(12):
            assert _top(index, d) == _exact(d)
            keys, held = index.cached_vectors()
            assert held <= 3 * one and len(keys) <= 3
            assert keys[-1] == (ORG, f"db{d}", "knowledge")  # the scope in use is kept
        _top(index, 10)  # used again: now the most recent, so db9 goes first
        assert _top(index, 0) == _exact(0)  # dropped earlier: read back, same answer
        keys, _ = index.cached_vectors()
        assert keys == [(ORG, "db11", "knowledge"), (ORG, "db10", "knowledge"), (ORG, "db0", "knowledge")]
    finally:
        index.close()


def test_one_scope_larger_than_the_bound_is_still_kept_while_in_use(tmp_path: Path) -> None:
    index = SqliteSearchIndex(tmp_path / "search.db", vector_cache_bytes=1)
    try:
        _fill(index, 2)
        assert _top(index, 0) == _exact(0) and _top(index, 1) == _exact(1)
        assert index.cached_vectors()[0] == [(ORG, "db1", "knowledge")]
    finally:
        index.close()
