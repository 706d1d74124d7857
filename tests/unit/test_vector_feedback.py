"""Vector pseudo-relevance feedback (retrieval/feedback.py) on the real local index.

A chunk that shares no word with the query and sits far from the query's vector is found once the
query vector moves toward the first pass's best chunk, which it closely resembles; the keyword lanes
are kept as they were."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc
from ctxstore.retrieval import feedback
from ctxstore.retrieval.fusion import fuse, ranked
from ctxstore.retrieval.hybrid import HybridRetriever, RetrievalScope


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def _doc(cid: str, text: str, vector: np.ndarray) -> ChunkDoc:
    return ChunkDoc(f"{cid}#0", cid, "db", "c", "memory", text, vector)


def test_the_moved_query_finds_what_resembles_the_first_pass_top(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    idx.ensure_database("org", "db")
    docs = [
        _doc("answer", "Caroline went to the support group yesterday", _unit(1, 0, 0, 0)),
        _doc("again", "The support group met again", _unit(0.98, 0, 0.2, 0)),
        _doc("sibling", "It was powerful, everyone shared their stories", _unit(0.95, 0.31, 0, 0)),
    ] + [_doc(f"noise{i}", f"Melanie painted lake number {i}", _unit(0, 0.6, 0.8, i / 100)) for i in range(12)]
    idx.upsert("org", docs)
    r = HybridRetriever(idx, embedder=None)
    scope = RetrievalScope(org="org", database="db", collections=["c"], stores=["memory"])
    # The query's own vector is nearer every noise chunk (0.6) than the answer's neighbourhood (0-0.31).
    first = r.run(
        scope, "support group", "", keyword=True, vector=True, operator="or", depth=2, vector_override=_unit(0, 1, 0, 0)
    )
    assert not {"answer", "again", "sibling"} & {
        h.item_id for lh in first.lanes if lh.lane == "vector" for h in lh.hits
    }
    top = ranked(fuse(first.lanes, 0.4).values())
    assert {c.item_id for c in top[:2]} == {"answer", "again"}  # the keyword lane put them first
    refined = feedback.refine(r, scope, first, top, depth=2)
    vector_ids = [h.item_id for lh in refined.lanes if lh.lane == "vector" for h in lh.hits]
    assert vector_ids[0] == "sibling"  # moved toward the answer: its look-alike now leads the vector lane
    assert [lh for lh in refined.lanes if lh.lane == "keyword"] == [lh for lh in first.lanes if lh.lane == "keyword"]
    assert refined.vector is first.vector
    idx.close()


def test_only_a_hybrid_pass_with_a_query_vector_is_refined(tmp_path: Path) -> None:
    idx = SqliteSearchIndex(tmp_path / "search.db")
    r = HybridRetriever(idx, embedder=None)
    scope = RetrievalScope(org="org", database="db", collections=[], stores=["memory"])
    first = r.run(scope, "x", "", keyword=True, vector=True, operator="or", depth=5, vector_override=_unit(1, 0))
    assert feedback.applies(first, 0.45)
    assert not feedback.applies(first, 0.0) and not feedback.applies(first, 1.0)
    keyword_only = r.run(scope, "x", "", keyword=True, vector=False, operator="or", depth=5)
    assert not feedback.applies(keyword_only, 0.5)
    idx.close()
