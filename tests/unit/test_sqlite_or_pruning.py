"""SQLite search index: OR queries over large postings drop their most common words (kept: at least two)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxstore.adapters.local.keyword_lane as keyword_lane
import ctxstore.adapters.local.sqlite_search_index as sqlite_index
from ctxstore.ports.search_index import ChunkDoc, SearchFilter


def _doc(i: int, text: str) -> ChunkDoc:
    return ChunkDoc(f"c{i}", f"i{i}", "db", "", "knowledge", text, None)


def test_common_words_are_dropped_past_the_postings_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    idx = sqlite_index.SqliteSearchIndex(tmp_path / "search.db")
    docs = [_doc(i, "common filler words") for i in range(20)]
    docs += [_doc(100 + i, "common middling words") for i in range(3)]
    docs.append(_doc(200, "common rarest words"))
    idx.upsert("org", docs)
    flt = SearchFilter(database="db", collections=[""], store="knowledge")
    everything = idx.keyword_search("org", flt, "common middling rarest", limit=50)
    assert len(everything) == 24  # under the default budget nothing is dropped
    monkeypatch.setattr(keyword_lane, "MAX_OR_POSTINGS", 5)
    pruned = idx.keyword_search("org", flt, "common middling rarest", limit=50)
    assert {h.item_id for h in pruned} == {"i100", "i101", "i102", "i200"}  # "common" (24 rows) dropped
    assert pruned[0].item_id == "i200"
    # two words are always kept, however common
    assert len(idx.keyword_search("org", flt, "common words", limit=50)) == 24
    # phrase and and-queries are never pruned
    assert len(idx.keyword_search("org", flt, "common words", limit=50, operator="and")) == 24
    idx.close()
