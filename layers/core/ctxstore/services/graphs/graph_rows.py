"""The rows an item's graph step writes: from its stored `graph_payload`, or from what the extractor found in
its chunks; and its source node's properties."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.domain.chunking import Chunk
from ctxstore.domain.graph_keys import canonical_predicate, entity_id
from ctxstore.domain.items import ItemRecord, ItemRef
from ctxstore.ports.extractor import Extraction
from ctxstore.services.graphs.entity_graph import BYOG, EXTRACTED, EntityRow, ItemAccess, RelationRow
from ctxstore.services.graphs.item_graph import SourceProps
from ctxstore.services.graphs.shapes import chunk_for


@dataclass(frozen=True)
class GraphRows:
    """An item's entities and relations, prepared for the graph step's write."""

    entities: list[EntityRow]
    relations: list[RelationRow]


def extracted_rows(chunks: Sequence[Chunk], found_all: Sequence[Extraction]) -> GraphRows:
    entities: dict[str, EntityRow] = {}
    relations: list[RelationRow] = []
    for c, found in zip(chunks, found_all, strict=True):
        local: dict[str, str] = {}
        for e in found.entities:
            eid = entity_id(e.name, e.type, e.namespace)
            local[e.key] = eid
            entities.setdefault(eid, EntityRow(eid, e.name, e.type, e.namespace))
        for r in found.relations:
            if r.source in local and r.target in local and local[r.source] != local[r.target]:
                relations.append(
                    RelationRow(
                        source=local[r.source],
                        target=local[r.target],
                        raw=r.raw_predicate,
                        canonical=r.canonical_predicate,
                        context=r.context,
                        confidence=r.confidence,
                        temporal=r.temporal_details,
                        chunk_id=c.id,
                        origin=EXTRACTED,
                    )
                )
    return GraphRows(list(entities.values()), relations)


def source_props(ref: ItemRef, record: ItemRecord, access: ItemAccess) -> SourceProps:
    return SourceProps(
        item_id=ref.item_id,
        title=str(record["title"] or ""),
        kind=str(record["app_type"] or record["source_type"] or ""),
        provider=str(record["provider"] or ""),
        external_id=str(record["external_id"] or ""),
        thread_id=record["thread_id"] or None,
        parent_id=record["parent_id"] or None,
        acl=access.acl,
        public=access.public,
        timestamp=access.timestamp,
    )


def supplied_rows(data: dict[str, Any], chunks: Sequence[Chunk]) -> GraphRows:
    """An item's rows from its stored `graph_payload` (BYOG): the whole graph as sent."""
    keys: dict[str, EntityRow] = {}
    for key, e in (data.get("entities") or {}).items():
        ns = str(e.get("namespace") or "")
        keys[key] = EntityRow(entity_id(e["name"], e["type"], ns), e["name"], e["type"], ns)
    relations = [
        RelationRow(
            source=keys[r["source"]].eid,
            target=keys[r["target"]].eid,
            raw=r["predicate"],
            canonical=canonical_predicate(r["predicate"]),
            context=r.get("context") or "",
            confidence=1.0,
            temporal=r.get("temporal_details"),
            chunk_id=chunk_for(r.get("context") or "", chunks),
            origin=BYOG,
        )
        for r in data.get("relations") or []
        if r["source"] in keys and r["target"] in keys
    ]
    return GraphRows(list(keys.values()), relations)
