"""The chunks index's mapping and the encodings the OpenSearch adapter writes and queries with.

Metadata filters are exact and typed: each scalar of `metadata`/`additional_metadata` is indexed as one
keyword token `<map>\x1f<key>\x1f<type>:<value>` in `meta_terms` (a list stores one token per element),
so 2024 and "2024" differ, a list filter is a `terms` query (any of), and user keys never add mapping
fields (the field-count limit). The maps themselves are kept in `_source` only (`enabled: false`).

Each document also carries `version` (the item version it was indexed for) and `write_id` (unique per
document, time-ordered): server-generated `_id`s and a 60 s refresh mean copies of one chunk can coexist
for a while, and readers use these two to pick the copy that counts (opensearch_index.py).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from ctxstore.ports.search_index import ChunkDoc, Store

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64


def index_body(dimension: int) -> dict[str, Any]:
    """Settings and mapping of the chunks index."""
    keyword = {"type": "keyword"}
    return {
        "settings": {"index": {"knn": True}},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "org": keyword,
                "database": keyword,
                "collection": keyword,
                "store": keyword,
                "item_id": keyword,
                "chunk_id": keyword,
                "version": keyword,
                "write_id": keyword,
                "source_type": keyword,
                "title": {"type": "text", "analyzer": "english"},
                "text": {"type": "text", "analyzer": "english"},
                "created_at": {"type": "double"},
                "position": {"type": "integer"},
                "meta_terms": {"type": "keyword", "ignore_above": 8191},
                "metadata": {"type": "object", "enabled": False},
                "additional_metadata": {"type": "object", "enabled": False},
                "vector": {
                    "type": "knn_vector",
                    "dimension": dimension,
                    "method": {
                        "name": "hnsw",
                        "engine": "faiss",
                        "space_type": "innerproduct",
                        "parameters": {"ef_construction": 128, "m": 16},
                    },
                },
            },
        },
    }


def new_write_id() -> str:
    """Unique per document and ordered by time: the newest copy of a chunk sorts last."""
    return f"{time.time_ns():020d}-{os.urandom(6).hex()}"


def _encode(value: Any) -> str | None:
    """The typed token of one scalar; None for values that are not filterable (objects, nested lists)."""
    if value is None:
        return "z:"
    if isinstance(value, bool):
        return "b:true" if value else "b:false"
    if isinstance(value, int | float):
        f = float(value)
        return f"n:{int(f)}" if f.is_integer() and abs(f) < 2**53 else f"n:{f!r}"
    if isinstance(value, str):
        return "s:" + value
    return None


def meta_terms(prefix: str, meta: dict[str, Any]) -> list[str]:
    """Index tokens of one metadata map: one per scalar value (a list contributes each element)."""
    out: dict[str, None] = {}
    for key, value in meta.items():
        for v in value if isinstance(value, list) else [value]:
            enc = _encode(v)
            if enc is not None:
                out.setdefault(f"{prefix}\x1f{key}\x1f{enc}", None)
    return list(out)


def filter_tokens(prefix: str, key: str, value: Any) -> list[str]:
    values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
    tokens: list[str] = []
    for v in values:
        if isinstance(v, dict | list | tuple):
            raise ValueError("metadata filter values must be scalars or lists of scalars")
        enc = _encode(v)
        if enc is not None:
            tokens.append(f"{prefix}\x1f{key}\x1f{enc}")
    return tokens


def query_words(query: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _WORD.findall(query):
        seen.setdefault(word.lower(), None)
    return list(seen)[:MAX_QUERY_TERMS]


def phrase_words(query: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(query)]


def dot_from_score(score: float) -> float:
    """Inverse of the innerproduct space's score (ip > 0: 1 + ip; else 1 / (1 - ip))."""
    return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score


def chunk_doc(src: dict[str, Any]) -> ChunkDoc:
    """A stored document's `_source` as the port's chunk."""
    vector = src.get("vector")
    return ChunkDoc(
        chunk_id=src["chunk_id"],
        item_id=src["item_id"],
        database=src["database"],
        collection=src["collection"],
        store=cast(Store, src["store"]),
        text=src.get("text", ""),
        vector=None if vector is None else np.asarray(vector, dtype=np.float32),
        title=src.get("title", ""),
        source_type=src.get("source_type", ""),
        created_at=float(src.get("created_at", 0.0)),
        metadata=src.get("metadata") or {},
        additional_metadata=src.get("additional_metadata") or {},
        position=int(src.get("position", 0)),
        version=str(src.get("version") or ""),
    )


def newest_copies(hits: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """chunk_id -> the `_source` of its newest copy (highest version, then latest write), in first-seen order."""
    best: dict[str, dict[str, Any]] = {}
    for h in hits:
        src = h["_source"]
        have = best.get(src["chunk_id"])
        if have is None or _copy_rank(src) > _copy_rank(have):
            best[src["chunk_id"]] = src
    return best


def _copy_rank(src: dict[str, Any]) -> tuple[str, str]:
    return (str(src.get("version") or ""), str(src.get("write_id") or ""))
