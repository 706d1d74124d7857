"""A scope's vectors read back from search.db in blocks (vector_loading.load_scope) equal what was written.

A fresh index on the same file must answer vector searches exactly as the index that wrote the rows (whose
cache was filled as it wrote), across several collections, deletions and more rows than one read block."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ctxstore.adapters.local import sqlite_search_index as ssi
from ctxstore.adapters.local import vector_loading
from ctxstore.ports.search_index import ChunkDoc, SearchFilter


def _docs(rng: np.random.Generator, start: int, n: int) -> list[ChunkDoc]:
    vecs = rng.normal(size=(n, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [
        ChunkDoc(f"c{i}#0", f"c{i}", "db", f"col{i % 3}", "knowledge", f"text {i}", vecs[i - start])
        for i in range(start, start + n)
    ]


def test_a_reloaded_scope_answers_like_the_one_that_wrote_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_loading, "LOAD_BLOCK", 97)  # many blocks, the last one partial
    rng = np.random.default_rng(5)
    writer = ssi.SqliteSearchIndex(tmp_path / "search.db")
    writer.ensure_database("org", "db")
    for start in range(0, 1000, 250):
        writer.upsert("org", _docs(rng, start, 250))
    writer.delete_item("org", "db", "col1", "knowledge", "c10")
    queries = rng.normal(size=(20, 8)).astype(np.float32)
    filters = [
        SearchFilter(database="db", collections=[], store="knowledge"),
        SearchFilter(database="db", collections=["col2"], store="knowledge"),
    ]
    expected = [
        [(h.chunk_id, h.score) for h in writer.vector_search("org", f, q, limit=15)] for f in filters for q in queries
    ]
    writer.close()
    shutil.rmtree(tmp_path / "search.db.vectors")  # the close saved a snapshot: read the rows from SQLite here
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    got = [
        [(h.chunk_id, h.score) for h in reader.vector_search("org", f, q, limit=15)] for f in filters for q in queries
    ]
    assert got == expected
    assert all("c10#0" not in {cid for cid, _ in hits} for hits in got)
    reader.close()


def test_mixed_dimensions_in_one_scope_are_refused(tmp_path: Path) -> None:
    import sqlite3

    idx = ssi.SqliteSearchIndex(tmp_path / "search.db")
    idx.ensure_database("org", "db")
    idx.upsert("org", _docs(np.random.default_rng(1), 0, 5))
    idx.close()
    conn = sqlite3.connect(tmp_path / "search.db")
    conn.execute("UPDATE chunks SET dim = 4, vector = ? WHERE chunk_id = 'c3#0'", (np.zeros(4, np.float32).tobytes(),))
    conn.commit()
    conn.close()
    reader = ssi.SqliteSearchIndex(tmp_path / "search.db")
    with pytest.raises(ValueError, match="different dimensions"):
        reader.vector_search(
            "org", SearchFilter(database="db", collections=[], store="knowledge"), np.ones(8, np.float32), limit=3
        )
    reader.close()
