"""Adapter factories for the SearchIndex contract suite.

Each factory takes a folder and returns (index, close). Opening the same folder again must
see what was written before (the suite checks persistence that way). Adapters for other
backends (e.g. OpenSearch) join by adding a factory here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import SearchIndex

Factory = Callable[[Path], tuple[SearchIndex, Callable[[], None]]]


def _sqlite(folder: Path) -> tuple[SearchIndex, Callable[[], None]]:
    index = SqliteSearchIndex(folder / "search.db")
    return index, index.close


SEARCH_INDEXES: dict[str, Factory] = {"sqlite": _sqlite}
