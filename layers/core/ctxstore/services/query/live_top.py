"""The chunks an answer shows: the best candidates still live, and which of them the graph can relate.

A search index whose deletes lag its writes (OpenSearch Serverless) can still hold chunks of a deleted item or of an
older version: a candidate is shown only when its chunk is indexed and its item record exists at the version the
chunk was indexed for. The records of a window of candidates are read in one call (ten answered items in ten
collections were ten lookups). Those records also tell which chunks can carry relations: an item whose graph step
finished with none (`relations_created` 0) has no evidence edge in its collection's graph, so a collection whose
answered items all say so is not read for the graph context (the answer is the same: the read would find nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxstore.domain.items import COMPLETED, ItemRecord, ItemRef
from ctxstore.ports.search_index import ChunkDoc, SearchIndex
from ctxstore.retrieval.fusion import Candidate
from ctxstore.services.items.service import ItemService

RecordKey = tuple[str, str, str]  # (store, collection, item id)


def live_top(
    idx: SearchIndex,
    items: ItemService,
    org: str,
    database: str,
    candidates: Sequence[Candidate],
    docs: dict[str, ChunkDoc],
    records: dict[RecordKey, ItemRecord | None],
    want: int,
) -> list[Candidate]:
    """The first `want` live candidates (the records read go into `records`, the chunks into `docs`). Locally the
    first window is the whole answer; the next windows only replace what a lagging index still held."""
    top: list[Candidate] = []
    start = 0
    while len(top) < want and start < len(candidates):
        window = list(candidates[start : start + want - len(top)])
        start += len(window)
        unknown = [c.chunk_id for c in window if c.chunk_id not in docs]
        if unknown:
            docs.update((d.chunk_id, d) for d in idx.get_chunks(org, unknown))
        refs = {
            (c.store, c.collection, c.item_id): ItemRef(database, c.collection, c.store, c.item_id)
            for c in window
            if c.chunk_id in docs and (c.store, c.collection, c.item_id) not in records
        }
        found = items.get_many(org, list(refs.values()))
        for key, ref in refs.items():
            stored = found.get(ref)
            records[key] = stored.data if stored is not None else None
        for c in window:
            d = docs.get(c.chunk_id)
            rec = records.get((c.store, c.collection, c.item_id))
            if d is not None and rec is not None and (not d.version or str(rec["version"]) == d.version):
                top.append(c)
    return top


def may_relate(record: ItemRecord | None) -> bool:
    """False only for an item whose graph step finished and wrote no relation (unknown counts as maybe)."""
    return record is None or record["status"] != COMPLETED or record.get("relations_created") != 0
