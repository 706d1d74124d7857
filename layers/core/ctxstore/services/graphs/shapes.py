"""What the graph service hands out, shaped from graph rows: item access on graph edges, subgraph members,
query path groups, and the small argument parsers of the graph routes."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ctxstore.domain.chunking import Chunk
from ctxstore.domain.errors import invalid
from ctxstore.domain.graph_keys import acl_key, item_readers
from ctxstore.domain.items import ItemRecord
from ctxstore.retrieval.graph_context import PathGroup
from ctxstore.services.graphs.entity_graph import ItemAccess, entity_ref, evidence


def item_access(record: ItemRecord) -> ItemAccess:
    readers = item_readers(record["additional_metadata"])
    return ItemAccess(
        acl=acl_key(readers),
        public=readers is None,
        timestamp=float(record["timestamp"] or record["created_at"] or 0.0),
        provider=str(record["provider"] or ""),
    )


def chunk_for(context: str, chunks: Sequence[Chunk]) -> str:
    """The chunk that contains a supplied relation's context (else the item's first chunk)."""
    if context:
        for c in chunks:
            if context in c.text:
                return c.id
    return chunks[0].id if chunks else ""


def positive_int(raw: str | int | None, name: str, default: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise invalid(f"'{name}' must be an integer") from None


def member_row(props: dict[str, Any], depth: int, via: str | None, relation: str | None) -> dict[str, Any]:
    m: dict[str, Any] = {
        "source_id": str(props["sid"]),
        "title": props.get("title") or "",
        "app_kind": props.get("kind") or "",
        "app_provider": props.get("provider") or "",
        "app_external_id": props.get("external_id") or "",
        "thread_id": props.get("thread_id") or "",
        "depth": depth,
        "hydration": "resolved",
    }
    if via is not None:
        m["discovered_via"] = via
        m["discovered_relation"] = relation
    return m


def path_group(chunk_ids: list[str], triples: list[Any], score: float) -> PathGroup:
    rids = sorted(str(r.properties.get("rid")) for _, _, r in triples)
    group_id = "grp_" + hashlib.sha1("\x1f".join(chunk_ids + rids).encode()).hexdigest()[:16]
    contexts = list(dict.fromkeys(str(r.properties.get("context") or "") for _, _, r in triples))
    return {
        "group_id": group_id,
        "relevancy_score": round(score, 6),
        "combined_context": " ".join(c for c in contexts if c),
        "source_chunk_ids": chunk_ids,
        "triplets": [
            {
                "source": {k: v for k, v in entity_ref(a.properties).items() if k != "identifier"},
                "target": {k: v for k, v in entity_ref(b.properties).items() if k != "identifier"},
                "relation": {
                    "predicate": r.properties.get("canon", ""),
                    **evidence(r, epoch=True),
                },
            }
            for a, b, r in triples
        ],
    }
