"""The keyword lane's own bookkeeping (adapters/local/keyword_postings.py) stays exact under writes.

Document frequencies live in `kw_df`, kept in the writes' transactions; lengths come from an in-memory
map by row id. These tests compare both against what FTS5 and the chunks table say after random
upserts, re-upserts of the same ids (what connectors do all day) and deletes, and check that the
scores equal a bm25 computed here from scratch.
"""

from __future__ import annotations

import math
import random
import sqlite3
from collections import Counter
from pathlib import Path

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter
from tests.support.bm25 import reference_bm25

WORDS = [
    "heart",
    "aspirin",
    "risk",
    "statin",
    "cholesterol",
    "exercise",
    "sleep",
    "diet",
    "protein",
    "cell",
    "gene",
    "tumour",
    "dose",
    "trial",
]


def _doc(rng: random.Random, item: str, collection: str) -> ChunkDoc:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 120)))
    title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
    return ChunkDoc(f"{item}#0", item, "db", collection, "knowledge", text, None, title=title)


def _vocab_df(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, kw_fts, 'row')")
    out = {str(t): int(d) for t, d in conn.execute("SELECT term, doc FROM temp.v WHERE doc > 0")}
    conn.close()
    return out


def _kw_df(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    out = {str(t): int(d) for t, d in conn.execute("SELECT token, docs FROM kw_df")}
    conn.close()
    return out


def _churn(
    idx: SqliteSearchIndex, rng: random.Random, rounds: int, live: dict[str, ChunkDoc] | None = None
) -> dict[str, ChunkDoc]:
    """Random writes; returns what the index should hold (`live`, updated in place when given)."""
    live = {} if live is None else live
    for _ in range(rounds):
        batch = [_doc(rng, f"i{rng.randrange(40)}", rng.choice(["a", "b"])) for _ in range(rng.randint(1, 6))]
        idx.upsert("org1", batch)
        for d in batch:  # a chunk id is one row per organisation: the last copy wins, in any collection
            live[d.chunk_id] = d
        if rng.random() < 0.3 and live:
            victim = live.pop(rng.choice(sorted(live)))
            idx.delete_item("org1", "db", victim.collection, "knowledge", victim.item_id)
    return live


def test_document_frequencies_follow_every_write(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    idx = SqliteSearchIndex(path)
    _churn(idx, random.Random(7), 60)
    assert _kw_df(path) == _vocab_df(path)
    idx.delete_scope("org1", "db", "a")
    assert _kw_df(path) == _vocab_df(path)
    idx.delete_scope("org1", "db", None)
    assert _kw_df(path) == {}
    idx.close()


def test_scores_equal_bm25_from_scratch_after_churn(tmp_path: Path) -> None:
    """Lengths cached before re-upserts and deletes must not leak into later scores."""
    idx = SqliteSearchIndex(tmp_path / "search.db")
    rng = random.Random(11)
    flt = SearchFilter(database="db", collections=["a"], store="knowledge")
    live: dict[str, ChunkDoc] = {}
    for _ in range(4):
        _churn(idx, rng, 25, live)
        idx.keyword_search("org1", flt, "aspirin statin", limit=5)  # fills the length cache mid-way
    docs = [d for d in live.values() if d.collection == "a"]
    query = ["aspirin", "statin", "sleep"]
    by_chunk = reference_bm25(docs, query)
    expected = {d.item_id: by_chunk[d.chunk_id] for d in docs if d.chunk_id in by_chunk}
    got = {h.item_id: h.score for h in idx.keyword_search("org1", flt, " ".join(query), limit=100)}
    assert got.keys() == expected.keys()
    assert all(math.isclose(got[k], expected[k], rel_tol=1e-9) for k in got)
    idx.close()


def test_a_file_without_document_frequencies_gets_them_from_the_index(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    idx = SqliteSearchIndex(path)
    _churn(idx, random.Random(3), 30)
    flt = SearchFilter(database="db", collections=[], store="knowledge")
    before = [(h.chunk_id, h.score) for h in idx.keyword_search("org1", flt, "heart gene trial", limit=20)]
    idx.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE kw_df")  # the layout before kw_df existed
    conn.commit()
    conn.close()
    idx = SqliteSearchIndex(path)
    assert [(h.chunk_id, h.score) for h in idx.keyword_search("org1", flt, "heart gene trial", limit=20)] == before
    assert Counter(_kw_df(path)) == Counter(_vocab_df(path))
    idx.close()
