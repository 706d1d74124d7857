"""The keyword index's FTS5 segments are merged into one while nothing is written (issue 28 goal 7).

A query's tokens probe every segment; an index written in many small transactions keeps many (24 at 100k
chunks ingested through the API). Merging must not change an answer, must step aside for writes, and must
finish a merge a write broke off.
"""

from __future__ import annotations

import math
import random
import threading
import time
from pathlib import Path

from ctxstore.adapters.local.keyword_merge import segment_count
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter

WORDS = [f"w{i}" for i in range(400)] + ["heart", "aspirin", "statin", "sleep", "protein"]
QUERIES = ["aspirin heart", "statin sleep protein", "w17 w230", "w5 w6 w7 heart"]
FLT = SearchFilter(database="db", collections=[f"c{i}" for i in range(7)], store="knowledge")


def _write_in_small_transactions(idx: SqliteSearchIndex, batches: int, start: int = 0) -> int:
    """At least `batches` upserts of 10 chunks, until the index has enough segments for a merge; answers the next."""
    rng = random.Random(start)
    b = start
    while b < start + batches or segment_count(idx._db) < idx.keyword_merger.min_segments:
        docs = [
            ChunkDoc(f"k{b}-{i}", f"i{b}-{i}", "db", f"c{b % 7}", "knowledge", " ".join(rng.choices(WORDS, k=80)), None)
            for i in range(10)
        ]
        idx.upsert("org1", docs)
        b += 1
    return b


def test_an_upsert_adds_one_segment_whatever_its_rows(tmp_path: Path) -> None:
    """Triggers on `chunks` made FTS5 flush a segment per row: an upsert of 10 chunks added 10."""
    idx = SqliteSearchIndex(tmp_path / "search.db")
    try:
        rng = random.Random(1)
        docs = [
            ChunkDoc(f"k{i}", f"i{i}", "db", "c0", "knowledge", " ".join(rng.choices(WORDS, k=80)), None)
            for i in range(10)
        ]
        idx.upsert("org1", docs)
        assert segment_count(idx._db) == 1
        idx.upsert("org1", docs[:5])  # a re-ingest: its deletes and inserts
        assert segment_count(idx._db) <= 3
        assert {h.chunk_id for h in idx.keyword_search("org1", FLT, " ".join(WORDS[:50]), limit=50)} == {
            d.chunk_id for d in docs
        }
        _integrity_ok(idx)
    finally:
        idx.close()


def _answers(idx: SqliteSearchIndex) -> dict[str, dict[str, float]]:
    return {q: {h.chunk_id: h.score for h in idx.keyword_search("org1", FLT, q, limit=50)} for q in QUERIES}


def _same(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> bool:
    return all(
        a[q].keys() == b[q].keys() and all(math.isclose(a[q][k], b[q][k], rel_tol=1e-9) for k in a[q]) for q in a
    )


def _integrity_ok(idx: SqliteSearchIndex) -> None:
    with idx._db.write() as conn:  # raises on a corrupt index
        conn.execute("INSERT INTO kw_fts (kw_fts, rank) VALUES ('integrity-check', 1)")


def test_an_idle_index_of_many_segments_is_merged_into_one_and_answers_the_same(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    try:
        _write_in_small_transactions(idx, 60)
        idx.delete_item("org1", "db", "c3", "knowledge", "i3-0")
        before = segment_count(idx._db)
        assert before >= idx.keyword_merger.min_segments
        answers = _answers(idx)
        assert all(answers.values())

        assert idx.merge_keyword_segments() == 0  # just written: not idle yet
        idx.keyword_merger.idle_s = 0.05
        time.sleep(0.06)
        assert idx.merge_keyword_segments() > 0
        assert segment_count(idx._db) == 1
        assert _same(_answers(idx), answers)
        _integrity_ok(idx)
        assert idx.merge_keyword_segments() == 0  # one segment: nothing to do
    finally:
        idx.close()


def test_a_merge_is_due_again_only_once_a_share_of_the_rows_is_new_even_after_a_restart(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    idx.keyword_merger.idle_s, idx.keyword_merger.min_new_rows = 0, 0
    after = _write_in_small_transactions(idx, 100)  # 1,000 rows or more
    assert idx.merge_keyword_segments() > 0
    idx.close()

    idx = SqliteSearchIndex(tmp_path / "search.db")
    merger = idx.keyword_merger
    merger.idle_s, merger.min_new_rows = 0, 0
    try:
        after = _write_in_small_transactions(idx, 1, after)  # a few new rows, many segments
        assert segment_count(idx._db) >= merger.min_segments
        assert idx.merge_keyword_segments() == 0  # under 10 % new since the merge before the restart
        _write_in_small_transactions(idx, 12, after)  # 10 % more rows
        assert idx.merge_keyword_segments() > 0
        assert segment_count(idx._db) == 1
    finally:
        idx.close()


def test_segments_left_by_re_ingests_of_a_few_rows_are_merged_once_the_last_merge_is_old_enough(
    tmp_path: Path,
) -> None:
    """Re-ingests and deletes add segments but hardly any rows: the share rule alone never merged them again
    (at 1M, 10 segments doubled a 100-collection query's postings read)."""
    idx = SqliteSearchIndex(tmp_path / "search.db")
    merger = idx.keyword_merger
    merger.idle_s, merger.min_new_rows = 0, 0
    try:
        _write_in_small_transactions(idx, 100)
        assert idx.merge_keyword_segments() > 0
        rng = random.Random(5)
        b = 0
        while segment_count(idx._db) < merger.min_segments and b < 200:  # re-ingests of rows already there
            text = " ".join(rng.choices(WORDS, k=80))
            idx.upsert("org1", [ChunkDoc(f"k{b}-0", f"i{b}-0", "db", f"c{b % 7}", "knowledge", text, None)])
            b += 1
        idx.delete_item("org1", "db", "c3", "knowledge", "i3-0")
        assert segment_count(idx._db) >= merger.min_segments
        answers = _answers(idx)
        assert idx.merge_keyword_segments() == 0  # few new rows, and the last merge is recent
        merger.max_age_s = 0.05
        time.sleep(0.06)
        assert idx.merge_keyword_segments() > 0
        assert segment_count(idx._db) == 1
        assert _same(_answers(idx), answers)
        _integrity_ok(idx)
        assert idx.merge_keyword_segments() == 0  # one segment again
    finally:
        idx.close()


def test_few_segments_are_left_alone(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    try:
        for start in (0, 1):  # two upserts: two segments
            idx.upsert("org1", [ChunkDoc(f"k{start}", f"i{start}", "db", "c0", "knowledge", "heart sleep", None)])
        idx.keyword_merger.idle_s = 0
        assert 1 <= segment_count(idx._db) < idx.keyword_merger.min_segments
        assert idx.merge_keyword_segments() == 0
    finally:
        idx.close()


def test_a_write_breaks_the_merge_off_between_steps_and_the_next_idle_period_finishes_it(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    merger = idx.keyword_merger
    try:
        _write_in_small_transactions(idx, 80)
        merger.idle_s, merger.pages = 0.05, 1  # one page a step: the merge takes many steps
        time.sleep(0.06)
        done: list[int] = []
        merging = threading.Thread(target=lambda: done.append(idx.merge_keyword_segments()))
        merging.start()
        deadline = time.monotonic() + 10
        while merger.steps < 1 and time.monotonic() < deadline:
            time.sleep(0.0005)
        new = ChunkDoc("new", "new", "db", "c1", "knowledge", "zeppelin aspirin", None)
        idx.upsert("org1", [new])  # waits for one step at most, then stops the merge
        merging.join(10)
        assert done and done[0] > 0
        broken_off_at = segment_count(idx._db)
        assert broken_off_at > 1  # unfinished
        assert [h.chunk_id for h in idx.keyword_search("org1", FLT, "zeppelin", limit=5)] == ["new"]
        answers = _answers(idx)  # with the new row

        merger.pages = 64
        time.sleep(0.06)
        assert idx.merge_keyword_segments() > 0  # continued although the count may now be under the threshold
        assert segment_count(idx._db) <= 2  # the merged segment, and the write's own when it came after the start
        assert _same(_answers(idx), answers)
        _integrity_ok(idx)
    finally:
        idx.close()


def test_serve_merges_on_its_own_once_idle(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db", keyword_merge_every_s=0.05)
    try:
        idx.keyword_merger.idle_s = 0.1
        _write_in_small_transactions(idx, 40)
        assert segment_count(idx._db) >= idx.keyword_merger.min_segments
        deadline = time.monotonic() + 10
        while segment_count(idx._db) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert segment_count(idx._db) == 1
    finally:
        idx.close()
