"""The ids of hit rows read once per row and kept (adapters/local/hit_rows.py), forgotten when a row is deleted."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

ORG, DB = "org1", "db1"


def _statements(index: SqliteSearchIndex) -> list[str]:
    seen: list[str] = []
    index._db.conn.set_trace_callback(seen.append)
    return seen


def test_a_search_reads_the_ids_of_rows_it_has_not_met_and_not_those_of_deleted_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((60, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = SqliteSearchIndex(tmp_path / "search.db")
    try:
        index.ensure_database(ORG, DB)
        index.upsert(
            ORG, [ChunkDoc(f"k{i}", f"i{i}", DB, "c", "knowledge", f"text {i}", v) for i, v in enumerate(vecs)]
        )
        flt = SearchFilter(database=DB, collections=[], store="knowledge")
        first = index.vector_search(ORG, flt, vecs[0], limit=10)
        seen = _statements(index)
        again = index.vector_search(ORG, flt, vecs[0], limit=10)  # the feedback search meets the same rows
        assert [h.chunk_id for h in again] == [h.chunk_id for h in first]
        assert not [s for s in seen if "chunks_hits" in s]  # every id was kept: no read of `chunks`
        assert index.delete_item(ORG, DB, "c", "knowledge", first[0].item_id) == 1
        after = index.vector_search(ORG, flt, vecs[0], limit=10)
        assert first[0].chunk_id not in {h.chunk_id for h in after}
        deleted = {r for r, ids in index._hits._rows.items() if ids[0] == first[0].chunk_id}
        assert not deleted  # forgotten with the write, not left for a search that took its view before it
    finally:
        index.close()
