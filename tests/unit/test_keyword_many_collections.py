"""A keyword query into many collections (issue 28 goal 7): one read of postings, the same bm25.

Tokens are scoped per collection, so a term in 30 collections is 30 tokens; the lane reads all of them in
one statement (one each cost ~0.3 ms: 130-170 ms for 100 collections of a 1M-chunk index).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter
from tests.support.bm25 import reference_bm25, traced_keyword_search

WORDS = ["heart", "aspirin", "risk", "statin", "cholesterol", "exercise", "sleep", "diet", "protein", "cell"]
COLLECTIONS = [f"c{i}" for i in range(30)]


def _docs(rng: random.Random) -> list[ChunkDoc]:
    out = []
    for i in range(600):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 120)))
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
        out.append(ChunkDoc(f"k{i}", f"i{i}", "db", COLLECTIONS[i % 30], "knowledge", text, None, title=title))
    return out


def test_twenty_collections_score_as_one_corpus_in_a_fixed_number_of_statements(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    try:
        docs = _docs(random.Random(4))
        idx.upsert("org1", docs)
        idx.delete_item("org1", "db", "c3", "knowledge", "i3")
        live = [d for d in docs if d.item_id != "i3"]
        wanted = COLLECTIONS[:20]
        query = ["aspirin", "statin", "sleep"]
        flt = SearchFilter(database="db", collections=wanted, store="knowledge")
        got, statements = traced_keyword_search(idx, "org1", flt, " ".join(query))
        expected = reference_bm25([d for d in live if d.collection in wanted], query)
        assert got.keys() == expected.keys()
        assert all(math.isclose(got[k], expected[k], rel_tol=1e-9) for k in got)
        postings_reads = [s for s in statements if "kw_postings" in s]
        assert len(postings_reads) == 1, postings_reads  # not one per (term, collection): 60 here
    finally:
        idx.close()
