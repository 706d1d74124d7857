"""Keyword scores of the SQLite index come from the queried collections' own statistics (issue 15).

FTS5's bm25() counts documents and lengths over the whole table, so another organisation's data (or
another collection's) changed a score and leaked its size. These tests fail on that implementation.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

MINE = [
    ("a", "Aspirin lowers the risk of heart attacks in older adults."),
    ("b", "Heart disease is the leading cause of death; aspirin is debated."),
    ("c", "Statins reduce cholesterol and the risk of a heart attack."),
    ("d", "Exercise helps the heart."),
]
# Another tenant's corpus: many long rows full of the same words (it moves document counts, average
# length and every term's document frequency, table-wide).
THEIRS = [(f"x{i}", "heart aspirin risk " * (i % 7 + 1) + "unrelated filler words " * 20) for i in range(300)]


def _docs(rows: list[tuple[str, str]], collection: str = "", database: str = "db") -> list[ChunkDoc]:
    return [ChunkDoc(f"{i}#0", i, database, collection, "knowledge", t, None, title="") for i, t in rows]


def _scores(idx: SqliteSearchIndex, query: str, operator: str = "or") -> list[tuple[str, float]]:
    flt = SearchFilter(database="db", collections=[""], store="knowledge")
    return [(h.item_id, h.score) for h in idx.keyword_search("org1", flt, query, limit=10, operator=operator)]


def test_scores_do_not_depend_on_other_orgs_or_collections(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    idx.upsert("org1", _docs(MINE))
    queries = [("heart attack risk", "or"), ("aspirin heart", "and"), ("heart attack", "phrase")]
    alone = {q: _scores(idx, *q) for q in queries}
    assert all(alone.values()) and alone[queries[0]][0][0] in {"a", "c"}
    idx.upsert("org2", _docs(THEIRS))  # another organisation, same database and collection names
    idx.upsert("org1", _docs(THEIRS, collection="other"))  # another collection of the same database
    idx.upsert("org1", _docs(THEIRS, database="db2"))  # another database
    assert {q: _scores(idx, *q) for q in queries} == alone  # exactly equal, not close
    # Deleting what was added restores nothing different either (the statistics follow deletes).
    idx.delete_scope("org1", "db", "other")
    assert {q: _scores(idx, *q) for q in queries} == alone
    idx.close()


def test_statistics_span_exactly_the_collections_queried(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    idx.upsert("org1", _docs(MINE, collection="one"))
    idx.upsert("org1", _docs(THEIRS, collection="two"))
    both = SearchFilter(database="db", collections=["one", "two"], store="knowledge")
    one = SearchFilter(database="db", collections=["one"], store="knowledge")
    s_one = {h.item_id: h.score for h in idx.keyword_search("org1", one, "heart risk", limit=10)}
    s_both = {h.item_id: h.score for h in idx.keyword_search("org1", both, "heart risk", limit=500)}
    assert set(s_one) <= set(s_both)
    assert any(abs(s_one[i] - s_both[i]) > 1e-9 for i in s_one)  # the union's statistics, when asked for
    idx.close()


def test_an_index_written_by_the_table_wide_version_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    idx = SqliteSearchIndex(path)
    idx.upsert("org1", _docs(MINE))
    expected = _scores(idx, "heart attack risk")
    idx.close()
    # Turn the file back into the previous layout: the table-wide FTS5 index and no keyword columns' data.
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        DROP TABLE kw_fts; DELETE FROM kw_scopes;
        UPDATE chunks SET kw_scope = NULL, kw_title = NULL, kw_text = NULL, kw_len = NULL;
        CREATE VIRTUAL TABLE chunks_fts USING fts5(scope, title, text, content='chunks', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2');
        INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild');
        """
    )
    conn.close()
    idx = SqliteSearchIndex(path)
    assert _scores(idx, "heart attack risk") == expected
    idx.upsert("org1", _docs([("e", "A heart attack risk calculator.")]))
    assert "e" in {i for i, _ in _scores(idx, "heart attack risk")}
    idx.close()


def test_short_text_scopes_normalise_length_less(tmp_path: Path) -> None:
    """Two turns that hold the query word once: the longer one loses less to the shorter than with b 0.75."""
    import ctxstore.adapters.local.keyword_lane as lane

    idx = SqliteSearchIndex(tmp_path / "search.db")
    turns = [("s", "Caroline: the support group."), ("l", "Melanie: " + "so " * 30 + "the support group was great.")]
    turns += [(f"f{i}", f"Filler turn number {i} about nothing.") for i in range(20)]
    idx.upsert("org1", _docs(turns))
    short = dict(_scores(idx, "support"))
    b = lane.BM25_B_SHORT
    lane.BM25_B_SHORT = lane.BM25_B  # what the long-text rule would give
    try:
        long_rule = dict(_scores(idx, "support"))
    finally:
        lane.BM25_B_SHORT = b
    assert short["l"] / short["s"] > long_rule["l"] / long_rule["s"]
    idx.close()
