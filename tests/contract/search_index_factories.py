"""Adapter factories for the SearchIndex contract suite.

Each factory takes a folder and returns (index, close). Opening the same folder again must
see what was written before (the suite checks persistence that way). Adapters for other
backends (e.g. OpenSearch) join by adding a factory here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import SearchIndex
from tests.fakes.ports import InMemorySearchIndex

Factory = Callable[[Path], tuple[SearchIndex, Callable[[], None]]]


def _sqlite(folder: Path) -> tuple[SearchIndex, Callable[[], None]]:
    index = SqliteSearchIndex(folder / "search.db")
    return index, index.close


def _sqlite_coded(folder: Path) -> tuple[SearchIndex, Callable[[], None]]:
    """The same index with the 1-bit code shortlist maintained from the first row (vector_cache.py); the
    suite's scopes are smaller than any shortlist, so this checks the codes follow every write."""
    index = SqliteSearchIndex(folder / "search.db", approx_min_rows=0, shortlist_min=0)
    return index, index.close


def _sqlite_ann(folder: Path) -> tuple[SearchIndex, Callable[[], None]]:
    """The same index with an HNSW index (ann_index.py) from the first row, built in the querying thread:
    every search goes through the index's candidates, so this checks it follows every write and filter."""
    index = SqliteSearchIndex(folder / "search.db", ann_min_rows=0, ann_in_background=False)
    return index, index.close


_COLLECTIONS: dict[Path, Any] = {}


def _opensearch(folder: Path) -> tuple[SearchIndex, Callable[[], None]]:
    """The OpenSearch Serverless adapter over the real opensearch-py stack (SigV4 signing included), answered by
    an in-memory collection kept per folder (tests/aws/fake_opensearch.py; its limits are listed there)."""
    from botocore.credentials import Credentials

    from ctxstore.adapters.aws.opensearch_index import OpenSearchIndex, opensearch_client
    from tests.aws.fake_opensearch import FakeCollection, RecordingAdapter, connection_class

    collection = _COLLECTIONS.setdefault(folder, FakeCollection())
    adapter = RecordingAdapter(collection)
    client = opensearch_client(
        "https://abc123.us-east-1.aoss.amazonaws.com",
        "us-east-1",
        Credentials("AKIDTEST", "secret"),
        connection_class=connection_class(adapter),
    )
    return OpenSearchIndex(client, dimension=8), client.close


_MEMORY: dict[Path, InMemorySearchIndex] = {}


def _memory(folder: Path) -> tuple[SearchIndex, Callable[[], None]]:
    """The in-memory fake (tests/fakes/ports): one per folder, so a reopen sees what was written."""
    return _MEMORY.setdefault(folder, InMemorySearchIndex()), lambda: None


SEARCH_INDEXES: dict[str, Factory] = {
    "sqlite": _sqlite,
    "sqlite-coded": _sqlite_coded,
    "sqlite-ann": _sqlite_ann,
    "opensearch": _opensearch,
    "memory": _memory,
}
