"""The groups a streamed publish upserts (IngestPipeline.publish_batches): bounded in chunks and bytes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from ctxstore.ports.search_index import ChunkDoc

# What one upsert of a streamed publish carries at most: OpenSearch's bulk guidance is 5-15 MB per request,
# and the adapter splits a call into requests of its own size again.
PUBLISH_DOCS = 500
PUBLISH_BYTES = 4 * 1024 * 1024


def doc_bytes(doc: ChunkDoc) -> int:
    """About what one chunk weighs in a bulk request: its texts, its vector as JSON numbers (~12 bytes
    each), its metadata and the fixed fields."""
    vector = 0 if doc.vector is None else int(doc.vector.size) * 12
    meta = len(json.dumps(doc.metadata, default=str)) + len(json.dumps(doc.additional_metadata, default=str))
    return len(doc.text.encode()) + len(doc.title.encode()) + vector + meta + 512


def bounded_batches(
    docs: Iterable[ChunkDoc], *, max_docs: int = PUBLISH_DOCS, max_bytes: int = PUBLISH_BYTES
) -> Iterator[list[ChunkDoc]]:
    """Consecutive groups of `docs` of at most `max_docs` chunks and about `max_bytes` (a chunk heavier than
    that alone goes in a group of its own); only one group is held at a time."""
    group: list[ChunkDoc] = []
    weight = 0
    for doc in docs:
        size = doc_bytes(doc)
        if group and (len(group) >= max_docs or weight + size > max_bytes):
            yield group
            group, weight = [], 0
        group.append(doc)
        weight += size
    if group:
        yield group
