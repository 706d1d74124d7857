"""The term-first copy of document frequencies (keyword_df_copy.py): read by queries into many collections, exact
whatever was written since its last merge, and equal to `kw_df` for every collection it calls clean."""

from __future__ import annotations

import json
import math
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ctxstore.adapters.local import keyword_df_copy as df_copy
from ctxstore.adapters.local import keyword_terms as kt
from ctxstore.adapters.local.data_dir_format import open_data_dir
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter
from tests.support.bm25 import reference_bm25, traced_keyword_search

WORDS = ["heart", "aspirin", "risk", "statin", "cholesterol", "exercise", "sleep", "diet", "protein", "cell"]
RARE = ["zebrafish", "ketamine"]  # in a few collections only
COLLECTIONS = [f"c{i}" for i in range(30)]
QUERY = ["aspirin", "statin", "zebrafish", "ketamine"]


def _docs(rng: random.Random, start: int, n: int, org_tag: str = "") -> list[ChunkDoc]:
    out = []
    for i in range(start, start + n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(60, 120))]
        if i % 7 == 0:
            words.append(RARE[i % 2])
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
        coll = COLLECTIONS[i % 30]
        out.append(ChunkDoc(f"k{org_tag}{i}", f"i{i}", "db", coll, "knowledge", " ".join(words), None, title=title))
    return out


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[SqliteSearchIndex]:
    index = SqliteSearchIndex(tmp_path / "search.db")
    index.keyword_merger.idle_s = 0.0  # merge_keyword_segments merges at once
    yield index
    index.close()


def _search(idx: SqliteSearchIndex, wanted: list[str]) -> tuple[dict[str, float], list[str]]:
    flt = SearchFilter(database="db", collections=wanted, store="knowledge")
    return traced_keyword_search(idx, "org1", flt, " ".join(QUERY))


def _assert_exact(got: dict[str, float], live: list[ChunkDoc], wanted: list[str]) -> None:
    expected = reference_bm25([d for d in live if d.collection in wanted], QUERY)
    assert got.keys() == expected.keys()
    assert all(math.isclose(got[k], expected[k], rel_tol=1e-9) for k in got)


def _df_lookups(statements: list[str]) -> list[str]:
    return [s for s in statements if "FROM kw_df WHERE" in s]


def test_a_query_into_many_collections_reads_the_copy_and_scores_as_one_corpus(idx: SqliteSearchIndex) -> None:
    docs = _docs(random.Random(4), 0, 600)
    idx.upsert("org1", docs)
    idx.upsert("org2", _docs(random.Random(5), 0, 300, "o2"))  # same database name, another organisation
    idx.merge_keyword_segments()
    wanted = COLLECTIONS[:20]
    got, statements = _search(idx, wanted)
    _assert_exact(got, docs, wanted)
    assert any("kw_tdf" in s for s in statements)
    assert _df_lookups(statements) == [], "every collection is clean: no token looked up in kw_df"


def test_a_database_of_few_collections_is_not_copied(idx: SqliteSearchIndex) -> None:
    """No query into fewer than MANY_SCOPES collections reads the copy: such a database's counts stay in kw_df only."""
    few = [d for d in _docs(random.Random(3), 0, 600) if d.collection in COLLECTIONS[: df_copy.MANY_SCOPES - 1]]
    idx.upsert("org1", few)
    idx.merge_keyword_segments()
    assert idx._db.conn.execute("SELECT count(*) FROM kw_tdf").fetchone() == (0,)
    got, _ = _search(idx, COLLECTIONS)
    _assert_exact(got, few, COLLECTIONS)
    idx.upsert("org1", _docs(random.Random(4), 600, 60))  # now 30 collections: all of them copied
    idx.merge_keyword_segments()
    assert _clean(idx) >= set(_scope_ids(idx, COLLECTIONS))


def test_writes_since_the_merge_are_looked_up_until_merged(idx: SqliteSearchIndex) -> None:
    rng = random.Random(6)
    docs = _docs(rng, 0, 600)
    idx.upsert("org1", docs)
    idx.merge_keyword_segments()
    more = [d for d in _docs(rng, 600, 90) if d.collection in ("c1", "c2", "c3")]
    idx.upsert("org1", more)
    idx.delete_item("org1", "db", "c4", "knowledge", "i4")
    live = [d for d in docs + more if d.item_id != "i4"]
    wanted = COLLECTIONS[:20]
    got, statements = _search(idx, wanted)
    _assert_exact(got, live, wanted)
    assert len(_df_lookups(statements)) == 1  # the written collections' tokens
    dirty = set(_scope_ids(idx, COLLECTIONS)) - _clean(idx)
    assert dirty == set(_scope_ids(idx, ["c1", "c2", "c3", "c4"]))
    idx.merge_keyword_segments()
    got, statements = _search(idx, wanted)
    _assert_exact(got, live, wanted)
    assert _df_lookups(statements) == []


def test_an_index_written_before_the_copy_is_copied_whole(idx: SqliteSearchIndex) -> None:
    docs = _docs(random.Random(8), 0, 600)
    idx.upsert("org1", docs)
    with idx._db.write() as conn:  # as a file from before: nothing copied, nothing pending
        df_copy.reset(conn)
    wanted = COLLECTIONS[5:25]
    got, statements = _search(idx, wanted)
    _assert_exact(got, docs, wanted)
    assert len(_df_lookups(statements)) == 1
    idx.merge_keyword_segments()
    got, statements = _search(idx, wanted)
    _assert_exact(got, docs, wanted)
    assert _df_lookups(statements) == []


def test_a_file_from_before_the_copy_is_upgraded_then_copied(tmp_path: Path) -> None:
    """A format-1 dir is recorded as format 2 (data_dir_format.py); the index adds `kw_df.merged` and the copy's
    tables when it opens the file, and the idle merges fill them."""
    data = tmp_path / "data"
    data.mkdir()
    docs = _docs(random.Random(9), 0, 600)
    index = SqliteSearchIndex(data / "search.db")
    index.upsert("org1", docs)
    index.close()
    raw = sqlite3.connect(data / "search.db")
    for statement in ("ALTER TABLE kw_df DROP COLUMN merged", "DROP TABLE kw_tdf", "DROP TABLE kw_clean"):
        raw.execute(statement)  # as release 2.x wrote it
    raw.commit()
    raw.close()
    (data / "format.json").write_text(json.dumps({"format": 1, "written_by": "2.1.0", "migrations": []}))
    assert open_data_dir(data) == [2]
    index = SqliteSearchIndex(data / "search.db")
    index.keyword_merger.idle_s = 0.0
    try:
        wanted = COLLECTIONS[:20]
        got, statements = _search(index, wanted)
        _assert_exact(got, docs, wanted)
        assert len(_df_lookups(statements)) == 1, "nothing copied yet: looked up"
        index.merge_keyword_segments()
        got, statements = _search(index, wanted)
        _assert_exact(got, docs, wanted)
        assert _df_lookups(statements) == []
        _assert_copy_matches(index)
    finally:
        index.close()


def test_every_clean_collection_has_kw_dfs_counts_through_interleaved_writes_and_small_merges(
    idx: SqliteSearchIndex,
) -> None:
    rng = random.Random(11)
    live: dict[str, ChunkDoc] = {}
    serial = 0
    for _ in range(12):
        batch = _docs(rng, serial, rng.randint(20, 80))
        serial += len(batch)
        idx.upsert("org1", batch)
        live.update((d.item_id, d) for d in batch)
        for item in rng.sample(sorted(live), k=min(len(live), rng.randint(0, 15))):
            d = live.pop(item)
            idx.delete_item("org1", "db", d.collection, "knowledge", item)
        with idx._db.write() as conn:  # a few small batches: some collections merged, some still pending
            for _ in range(rng.randint(0, 3)):
                df_copy.merge_pending(conn, limit=rng.randint(5, 60))
        _assert_copy_matches(idx)
        wanted = rng.sample(COLLECTIONS, 18)
        got, _ = _search(idx, wanted)
        _assert_exact(got, list(live.values()), wanted)
    idx.merge_keyword_segments()
    _assert_copy_matches(idx)
    assert _clean(idx) >= set(_scope_ids(idx, COLLECTIONS)), "after an idle merge every collection is clean"


def _scope_ids(idx: SqliteSearchIndex, collections: list[str]) -> list[int]:
    rows = idx._db.conn.execute(
        "SELECT id FROM kw_scopes WHERE org='org1' AND database='db'"
        " AND collection IN (SELECT value FROM json_each(?))",
        (json.dumps(collections),),
    )
    return [int(r[0]) for r in rows]


def _clean(idx: SqliteSearchIndex) -> set[int]:
    return {int(r[0]) for r in idx._db.conn.execute("SELECT scope FROM kw_clean")}


def _assert_copy_matches(idx: SqliteSearchIndex) -> None:
    conn: sqlite3.Connection = idx._db.conn
    clean = {int(r[0]) for r in conn.execute("SELECT scope FROM kw_clean")}
    copied: dict[tuple[int, str], int] = {}
    for term, scopes, docs in conn.execute("SELECT term, scopes, docs FROM kw_tdf"):
        ids, counts = np.frombuffer(scopes, dtype="<u4"), np.frombuffer(docs, dtype="<i4")
        assert np.all(np.diff(ids.astype(np.int64)) > 0) and np.all(counts > 0)
        copied.update({(int(s), str(term)): int(n) for s, n in zip(ids, counts, strict=True) if int(s) in clean})
    in_df = {
        (int(token[: kt.CODE_LEN], 36), str(token[kt.CODE_LEN :])): int(n)
        for token, n in conn.execute("SELECT token, docs FROM kw_df WHERE docs > 0")
        if int(token[: kt.CODE_LEN], 36) in clean
    }
    assert copied == in_df
