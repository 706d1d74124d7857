"""Search index: chunks with text (keyword search), vectors (semantic search) and filterable metadata.

Locally SQLite FTS5 plus a vector index; on AWS an OpenSearch Serverless
collection. Scores are returned raw; fusion happens in `retrieval/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:  # types only: a Lambda function that never embeds need not load numpy
    import numpy as np
    import numpy.typing as npt


Store = Literal["knowledge", "memory"]


@dataclass(frozen=True)
class ChunkDoc:
    chunk_id: str
    item_id: str
    database: str
    collection: str
    store: Store
    text: str
    vector: npt.NDArray[np.float32] | None
    title: str = ""
    source_type: str = ""
    created_at: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)  # schema-declared keys
    additional_metadata: dict[str, Any] = field(default_factory=dict)
    position: int = 0
    version: str = ""  # the item version the chunk was indexed for ("" where the index does not keep it)


class ItemKey(NamedTuple):
    """One item's place in the index."""

    database: str
    collection: str
    store: Store
    item_id: str


@dataclass(frozen=True)
class SearchFilter:
    database: str
    collections: Sequence[str]
    store: Store
    metadata: dict[str, Any] = field(default_factory=dict)  # exact match; a list matches any value
    additional_metadata: dict[str, Any] = field(default_factory=dict)
    item_ids: Sequence[str] | None = None


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    item_id: str
    collection: str
    score: float


class SearchIndex(Protocol):
    def ensure_database(self, org: str, database: str) -> bool:
        """Create what the database needs; True when ready."""
        ...

    def upsert(self, org: str, chunks: Sequence[ChunkDoc]) -> None: ...

    def delete_item(self, org: str, database: str, collection: str, store: Store, item_id: str) -> int: ...

    def replace_items(self, org: str, items: Sequence[ItemKey], chunks: Sequence[ChunkDoc]) -> None:
        """Each listed item's chunks become exactly its rows among `chunks` (none: the item is emptied),
        in as few writes as the store allows (one transaction locally)."""
        ...

    def delete_scope(self, org: str, database: str, collection: str | None) -> int:
        """Remove a collection (or, with None, the whole database)."""
        ...

    def keyword_search(
        self, org: str, flt: SearchFilter, query: str, *, limit: int, operator: str = "or"
    ) -> list[Hit]: ...

    def vector_search(
        self, org: str, flt: SearchFilter, vector: npt.NDArray[np.float32], *, limit: int, narrow: bool = False
    ) -> list[Hit]:
        """The `limit` nearest chunks by dot product, best first. `narrow`: a search near rows already found good
        (the feedback search, retrieval/feedback.py), which an approximate index may run at a smaller breadth."""
        ...

    def get_chunks(self, org: str, chunk_ids: Sequence[str]) -> list[ChunkDoc]: ...

    def item_chunks(self, org: str, database: str, collection: str, store: Store, item_id: str) -> list[ChunkDoc]:
        """Every chunk of one item (with vectors), in position order."""
        ...

    def count(self, org: str, database: str, store: Store) -> int: ...


@runtime_checkable
class LaggingSearchIndex(Protocol):
    """An index whose writes and deletes show in searches only after a delay (OpenSearch Serverless
    refreshes every 60 s), so a delete can miss a write that lands in searches later."""

    def settle_item(self, org: str, item: ItemKey, version: str) -> int:
        """Delete what searches show of the item that readers must not see (chunks of an older version, a
        second copy of a chunk), and answer how many distinct chunks of `version` searches see now."""
        ...
