"""SearchIndex on an OpenSearch Serverless VECTORSEARCH collection (opensearch-py, SigV4 for service "aoss").

Layout: one shared index for every org and database (fields org/database/store/collection on each chunk),
not one index per database. A VECTORSEARCH collection caps its index count and every index carries its
own HNSW graphs and shard overhead, so per-database indexes would bound the number of databases a
deployment can hold and make `ensure_database` wait for an index to become ready; a keyword filter on
org+database+store in front of every query is cheap (faiss efficient filtering runs an exact search
when the filter leaves few documents). Dropping a database is a delete_by_query instead of an index drop.

What VECTORSEARCH collections change compared with a cluster:
- no custom `_id` on writes: documents get server ids, so replacing a chunk is delete_by_query on
  (org, chunk_id) followed by a bulk `index` without `_id`; reads find chunks by the `chunk_id` field.
- no `refresh` on writes: a write becomes searchable after the collection's refresh interval, not on return.
  Reads therefore drop a second copy of a chunk_id (a replace whose delete ran before the old copy
  was searchable), keeping the first one returned.

Scores are raw: keyword = BM25 `_score` (multi_match over title^2 and text, English analyser), vector =
the dot product recovered from the innerproduct space's score (vectors are unit length, so cosine).
Metadata filters are exact and typed: each scalar of `metadata`/`additional_metadata` is indexed as one
keyword token `<map>\x1f<key>\x1f<type>:<value>` in `meta_terms` (a list stores one token per element),
so 2024 and "2024" differ, a list filter is a `terms` query (any of), and user keys never add mapping
fields (the field-count limit). The maps themselves are kept in `_source` only (`enabled: false`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, cast
from urllib.parse import urlparse

import numpy as np
import numpy.typing as npt
from opensearchpy import (
    AWSV4SignerAuth,
    Connection,
    ConnectionError,
    ConnectionTimeout,
    NotFoundError,
    OpenSearch,
    RequestError,
    RequestsHttpConnection,
    TransportError,
    helpers,
)

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.search_index import ChunkDoc, Hit, ItemKey, SearchFilter, Store

DEFAULT_INDEX = "ctxstore-chunks"
MAX_QUERY_TERMS = 64
PAGE = 1000  # documents per page when reading every chunk of an item
_WORD = re.compile(r"\w+", re.UNICODE)
_STORES: tuple[Store, ...] = ("knowledge", "memory")
_HIT_SOURCE = ["chunk_id", "item_id", "collection"]
_DOC_SOURCE = [
    "chunk_id",
    "item_id",
    "database",
    "collection",
    "store",
    "text",
    "vector",
    "title",
    "source_type",
    "created_at",
    "metadata",
    "additional_metadata",
    "position",
]


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


def opensearch_client(
    endpoint: str,
    region: str | None = None,
    credentials: Any = None,
    *,
    connection_class: type[Connection] | None = None,
    timeout: float = 10.0,
) -> OpenSearch:
    """A client for a collection endpoint (https://<id>.<region>.aoss.amazonaws.com), signed for "aoss".

    Region and credentials default to the process's boto3 session (AWS_REGION and the Lambda role; the
    session's credentials refresh themselves as the role's keys rotate). Builds no connection yet.
    """
    if credentials is None or not region:
        import boto3

        session = boto3.Session()
        credentials = credentials or session.get_credentials()
        region = region or session.region_name
    if not region:
        raise ValueError("no AWS region for the OpenSearch endpoint (set AWS_REGION or CTXSTORE_SEARCH_REGION)")
    url = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
    if not url.hostname:
        raise ValueError(f"not an OpenSearch endpoint: {endpoint!r}")
    return OpenSearch(
        hosts=[{"host": url.hostname, "port": url.port or 443}],
        http_auth=AWSV4SignerAuth(credentials, region, "aoss"),
        use_ssl=True,
        verify_certs=True,
        connection_class=connection_class or RequestsHttpConnection,
        timeout=timeout,
        max_retries=2,
        retry_on_timeout=True,
        pool_maxsize=8,
    )


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


def _filter_tokens(prefix: str, key: str, value: Any) -> list[str]:
    values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
    tokens: list[str] = []
    for v in values:
        if isinstance(v, dict | list | tuple):
            raise ValueError("metadata filter values must be scalars or lists of scalars")
        enc = _encode(v)
        if enc is not None:
            tokens.append(f"{prefix}\x1f{key}\x1f{enc}")
    return tokens


def _query_words(query: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _WORD.findall(query):
        seen.setdefault(word.lower(), None)
    return list(seen)[:MAX_QUERY_TERMS]


def dot_from_score(score: float) -> float:
    """Inverse of the innerproduct space's score (ip > 0: 1 + ip; else 1 / (1 - ip))."""
    return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score


class OpenSearchIndex:
    def __init__(self, client: OpenSearch, *, dimension: int, index: str = DEFAULT_INDEX) -> None:
        if dimension <= 0:
            raise ValueError("the vector dimension must be positive")
        self._os = client
        self._dim = dimension
        self._index = index
        self._ready = False

    # -- plumbing -------------------------------------------------------------------------------

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one request; throttling, 5xx and network faults become StoreUnavailable (retried as E6001)."""
        try:
            return fn(*args, **kwargs)
        except (ConnectionError, ConnectionTimeout) as exc:
            raise StoreUnavailable(f"OpenSearch unreachable: {exc}") from exc
        except TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else 0
            if status == 429 or status >= 500:
                raise StoreUnavailable(f"OpenSearch {status}: {exc.error}") from exc
            raise

    def _ensure_index(self) -> None:
        if self._ready:
            return
        if not self._call(self._os.indices.exists, index=self._index):
            try:
                self._call(self._os.indices.create, index=self._index, body=index_body(self._dim))
            except RequestError as exc:
                if exc.error != "resource_already_exists_exception":  # another function created it first
                    raise
        self._ready = True

    @staticmethod
    def _scope(org: str, database: str, store: str | None = None) -> list[dict[str, Any]]:
        clauses: list[dict[str, Any]] = [{"term": {"org": org}}, {"term": {"database": database}}]
        if store is not None:
            clauses.append({"term": {"store": store}})
        return clauses

    @classmethod
    def _filters(cls, org: str, flt: SearchFilter) -> list[dict[str, Any]] | None:
        """Filter clauses for a search, or None when nothing can match."""
        clauses = cls._scope(org, flt.database, flt.store)
        if flt.collections:
            clauses.append({"terms": {"collection": list(dict.fromkeys(flt.collections))}})
        if flt.item_ids is not None:
            if not flt.item_ids:
                return None
            clauses.append({"terms": {"item_id": list(dict.fromkeys(flt.item_ids))}})
        for prefix, conditions in (("m", flt.metadata), ("a", flt.additional_metadata)):
            for key, value in conditions.items():
                tokens = _filter_tokens(prefix, key, value)
                if not tokens:
                    return None
                clauses.append({"terms": {"meta_terms": tokens}})
        return clauses

    def _search(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            resp = self._call(self._os.search, index=self._index, body=body)
        except NotFoundError:
            return []  # nothing indexed yet
        return cast(list[dict[str, Any]], resp["hits"]["hits"])

    @staticmethod
    def _hits(raw: list[dict[str, Any]], limit: int, score: Any = float) -> list[Hit]:
        out: list[Hit] = []
        seen: set[str] = set()
        for h in raw:
            src = h["_source"]
            if src["chunk_id"] in seen:
                continue
            seen.add(src["chunk_id"])
            out.append(
                Hit(
                    chunk_id=src["chunk_id"],
                    item_id=src["item_id"],
                    collection=src["collection"],
                    score=score(h["_score"]),
                )
            )
            if len(out) == limit:
                break
        return out

    @staticmethod
    def _doc(src: dict[str, Any]) -> ChunkDoc:
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
        )

    def _source(self, org: str, c: ChunkDoc) -> dict[str, Any]:
        if c.store not in _STORES:
            raise ValueError(f"unknown store {c.store!r}")
        doc: dict[str, Any] = {
            "org": org,
            "database": c.database,
            "collection": c.collection,
            "store": c.store,
            "item_id": c.item_id,
            "chunk_id": c.chunk_id,
            "title": c.title,
            "text": c.text,
            "source_type": c.source_type,
            "created_at": c.created_at,
            "position": c.position,
            "metadata": c.metadata,
            "additional_metadata": c.additional_metadata,
            "meta_terms": meta_terms("m", c.metadata) + meta_terms("a", c.additional_metadata),
        }
        if c.vector is not None:
            vec = np.asarray(c.vector, dtype=np.float32).reshape(-1)
            if vec.shape != (self._dim,):
                raise ValueError(f"vector dimension {vec.size} for chunk {c.chunk_id!r} differs from {self._dim}")
            doc["vector"] = [float(x) for x in vec]
        return doc

    def _delete_where(self, clauses: list[dict[str, Any]]) -> int:
        try:
            resp = self._call(
                self._os.delete_by_query,
                index=self._index,
                body={"query": {"bool": {"filter": clauses}}},
                conflicts="proceed",
            )
        except NotFoundError:
            return 0
        return int(resp.get("deleted", 0))

    # -- port -----------------------------------------------------------------------------------

    def ensure_database(self, org: str, database: str) -> bool:
        self._ensure_index()  # databases are a filter inside the shared index: nothing else to create
        return True

    def upsert(self, org: str, chunks: Sequence[ChunkDoc]) -> None:
        if not chunks:
            return
        latest: dict[str, ChunkDoc] = {c.chunk_id: c for c in chunks}  # the last copy of a chunk_id wins
        docs = [self._source(org, c) for c in latest.values()]  # validate before touching the index
        self._ensure_index()
        self._delete_where([{"term": {"org": org}}, {"terms": {"chunk_id": list(latest)}}])
        actions = ({"_op_type": "index", "_index": self._index, "_source": d} for d in docs)
        try:
            self._call(helpers.bulk, self._os, actions, chunk_size=500, max_chunk_bytes=5 * 1024 * 1024)
        except helpers.BulkIndexError as exc:
            statuses = {int(next(iter(e.values())).get("status", 0)) for e in exc.errors}
            if statuses & {429, 500, 502, 503, 504}:
                raise StoreUnavailable(f"OpenSearch bulk: {len(exc.errors)} documents not indexed") from exc
            raise

    def delete_item(self, org: str, database: str, collection: str, store: Store, item_id: str) -> int:
        return self._delete_where(
            [*self._scope(org, database, store), {"term": {"collection": collection}}, {"term": {"item_id": item_id}}]
        )

    def replace_items(self, org: str, items: Sequence[ItemKey], chunks: Sequence[ChunkDoc]) -> None:
        for item in items:  # OpenSearch has no multi-document transaction: deletes, then one bulk write
            self.delete_item(org, item.database, item.collection, item.store, item.item_id)
        self.upsert(org, chunks)

    def delete_scope(self, org: str, database: str, collection: str | None) -> int:
        clauses = self._scope(org, database)
        if collection is not None:
            clauses.append({"term": {"collection": collection}})
        return self._delete_where(clauses)

    def keyword_search(self, org: str, flt: SearchFilter, query: str, *, limit: int, operator: str = "or") -> list[Hit]:
        if operator not in ("or", "and", "phrase"):
            raise ValueError(f"unknown keyword operator {operator!r}; use 'or', 'and' or 'phrase'")
        words = _query_words(query) if operator != "phrase" else [w.lower() for w in _WORD.findall(query)]
        clauses = self._filters(org, flt)
        if not words or limit <= 0 or clauses is None:
            return []
        # User text goes to an analysed match query (never query_string): no syntax to inject.
        match: dict[str, Any] = {"query": " ".join(words), "fields": ["title^2", "text"]}
        if operator == "phrase":
            match["type"] = "phrase"
        else:
            match["operator"] = operator
        body = {
            "size": limit * 2,  # spare rows for a chunk_id seen twice (see module doc)
            "_source": _HIT_SOURCE,
            "query": {"bool": {"filter": clauses, "must": [{"multi_match": match}]}},
        }
        return self._hits(self._search(body), limit)

    def vector_search(self, org: str, flt: SearchFilter, vector: npt.NDArray[np.float32], *, limit: int) -> list[Hit]:
        clauses = self._filters(org, flt)
        if limit <= 0 or clauses is None:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self._dim:
            raise ValueError(f"query vector has dimension {query.shape[0]}, the index holds {self._dim}")
        k = min(limit * 2, 10_000)
        body = {
            "size": k,
            "_source": _HIT_SOURCE,
            "query": {
                "knn": {
                    "vector": {"vector": [float(x) for x in query], "k": k, "filter": {"bool": {"filter": clauses}}}
                }
            },
        }
        return self._hits(self._search(body), limit, score=dot_from_score)

    def get_chunks(self, org: str, chunk_ids: Sequence[str]) -> list[ChunkDoc]:
        wanted = list(dict.fromkeys(chunk_ids))
        if not wanted:
            return []
        found: dict[str, ChunkDoc] = {}
        for start in range(0, len(wanted), PAGE):
            part = wanted[start : start + PAGE]
            body = {
                "size": len(part) * 2,
                "_source": _DOC_SOURCE,
                "query": {"bool": {"filter": [{"term": {"org": org}}, {"terms": {"chunk_id": part}}]}},
            }
            for h in self._search(body):
                found.setdefault(h["_source"]["chunk_id"], self._doc(h["_source"]))
        return [found[c] for c in wanted if c in found]

    def _pages(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        after: list[Any] | None = None
        while True:
            page = dict(body, size=PAGE, **({"search_after": after} if after else {}))
            hits = self._search(page)
            yield from hits
            if len(hits) < PAGE:
                return
            after = hits[-1]["sort"]

    def item_chunks(self, org: str, database: str, collection: str, store: Store, item_id: str) -> list[ChunkDoc]:
        body = {
            "_source": _DOC_SOURCE,
            "query": {
                "bool": {
                    "filter": [
                        *self._scope(org, database, store),
                        {"term": {"collection": collection}},
                        {"term": {"item_id": item_id}},
                    ]
                }
            },
            "sort": [{"position": "asc"}, {"chunk_id": "asc"}],
        }
        found: dict[str, ChunkDoc] = {}
        for h in self._pages(body):
            found.setdefault(h["_source"]["chunk_id"], self._doc(h["_source"]))
        return list(found.values())

    def count(self, org: str, database: str, store: Store) -> int:
        try:
            body = {"query": {"bool": {"filter": self._scope(org, database, store)}}}
            resp = self._call(self._os.count, index=self._index, body=body)
        except NotFoundError:
            return 0
        return int(resp["count"])
