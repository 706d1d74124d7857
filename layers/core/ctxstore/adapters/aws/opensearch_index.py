"""SearchIndex on an OpenSearch Serverless VECTORSEARCH collection (opensearch-py, SigV4 for service "aoss").

Layout: one shared index for every org and database (fields org/database/store/collection on each chunk),
not one index per database. A VECTORSEARCH collection caps its index count and every index carries its
own HNSW graphs and shard overhead, so per-database indexes would bound the number of databases a
deployment can hold and make `ensure_database` wait for an index to become ready; a keyword filter on
org+database+store in front of every query is cheap (faiss efficient filtering runs an exact search
when the filter leaves few documents).

What a Classic VECTORSEARCH collection allows (AWS's supported-operations table) shapes every write:
- no `_delete_by_query` (AOSS answers 404): a delete is a `_search` for the `_id`s (`_source: false`,
  paged with `search_after`), then `_bulk` `delete` by `_id`, each item's result checked;
- no custom `_id` on writes: documents get server ids; reads find chunks by the `chunk_id` field;
- no `refresh`: writes and deletes show in searches only after the 60 s refresh interval. A delete can
  therefore miss a copy written moments before, and a bulk re-sent after a timeout (by a retried task;
  the client itself never re-sends one) leaves a second copy. Each document carries the item `version`
  it was indexed for and a time-ordered `write_id`; readers keep one copy per `chunk_id` (the newest),
  `item_chunks` keeps the newest version only, the query path drops chunks whose item record is gone or
  names another version (services/query/service.py), and `settle_item` (run before an item becomes completed)
  deletes older versions and second copies once they are visible.

Scores are raw: keyword = BM25 `_score` (multi_match over title^2 and text, English analyser), vector =
the dot product recovered from the innerproduct space's score (vectors are unit length, so cosine).
"""

from __future__ import annotations

import json
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
)

from ctxstore.adapters.aws.opensearch_mapping import (
    chunk_doc,
    dot_from_score,
    filter_tokens,
    index_body,
    meta_terms,
    new_write_id,
    newest_copies,
    phrase_words,
    query_words,
)
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.search_index import ChunkDoc, Hit, ItemKey, SearchFilter, Store

__all__ = ["DEFAULT_INDEX", "OpenSearchIndex", "dot_from_score", "index_body", "meta_terms", "opensearch_client"]

DEFAULT_INDEX = "ctxstore-chunks"
PAGE = 1000  # documents per page of a paged read, and ids per bulk delete
BULK_DOCS = 500  # documents per bulk write ...
BULK_BYTES = 5 * 1024 * 1024  # ... and at most this many bytes of it
READ_TIMEOUT_S = 10.0  # searches (the API answers within API Gateway's 29 s)
BULK_TIMEOUT_S = 60.0  # one bulk of up to 5 MB of vectors into the HNSW graphs
_RETRYABLE = frozenset({429, 500, 502, 503, 504})
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
    "version",
    "write_id",
]
_BY_COPY = [{"chunk_id": "asc"}, {"write_id": "asc"}]  # a unique order: write_id tells copies apart


def opensearch_client(
    endpoint: str,
    region: str | None = None,
    credentials: Any = None,
    *,
    connection_class: type[Connection] | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> OpenSearch:
    """A client for a collection endpoint (https://<id>.<region>.aoss.amazonaws.com), signed for "aoss".

    Region and credentials default to the process's boto3 session (AWS_REGION and the Lambda role; the
    session's credentials refresh themselves as the role's keys rotate). Builds no connection yet.
    A request that timed out, or answered 502/504 (a gateway gave up: the write may have landed), is never
    re-sent by the client: a bulk `index` without `_id` sent twice writes every document twice.
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
        retry_on_timeout=False,
        retry_on_status=(503,),  # the service refused the request before doing anything
        pool_maxsize=8,
    )


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
            if status in _RETRYABLE or status >= 500:
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
    def _item(cls, org: str, item: ItemKey) -> list[dict[str, Any]]:
        return [
            *cls._scope(org, item.database, item.store),
            {"term": {"collection": item.collection}},
            {"term": {"item_id": item.item_id}},
        ]

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
                tokens = filter_tokens(prefix, key, value)
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

    def _pages(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every hit of a sorted search (the sort must be unique per document), page by page."""
        after: list[Any] | None = None
        while True:
            page = dict(body, size=PAGE, **({"search_after": after} if after else {}))
            hits = self._search(page)
            yield from hits
            if len(hits) < PAGE:
                return
            after = hits[-1]["sort"]

    @staticmethod
    def _hits(raw: list[dict[str, Any]], limit: int, score: Any = float) -> list[Hit]:
        out: list[Hit] = []
        seen: set[str] = set()
        for h in raw:
            src = h["_source"]
            if src["chunk_id"] in seen:  # a second copy (see the module doc): the best-scored one counts
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
            "version": c.version,
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
            doc["vector"] = vec.tolist()  # the same float32 values as Python floats, without a per-element loop
        return doc

    # -- writes ---------------------------------------------------------------------------------

    def _bulk(self, lines: list[str], docs: int) -> list[dict[str, Any]]:
        """One `_bulk` request (never re-sent by the client); its per-item results. A failed item raises:
        StoreUnavailable for throttling and 5xx (the task retries), RuntimeError for anything else."""
        body = "\n".join(lines) + "\n"
        resp = self._call(self._os.bulk, body=body, request_timeout=BULK_TIMEOUT_S)
        items = cast(list[dict[str, Any]], resp.get("items") or [])
        if len(items) != docs:
            raise StoreUnavailable(f"OpenSearch bulk answered {len(items)} results for {docs} actions")
        failed = [r for r in (next(iter(i.values())) for i in items) if "error" in r]
        if failed:
            statuses = {int(r.get("status", 0)) for r in failed}
            message = (
                f"OpenSearch bulk: {len(failed)} of {docs} actions failed ({sorted(statuses)}): {failed[0]['error']}"
            )
            if statuses & _RETRYABLE or max(statuses) >= 500:
                raise StoreUnavailable(message)
            raise RuntimeError(message)
        return items

    def _index_docs(self, docs: Sequence[dict[str, Any]]) -> None:
        """Bulk `index` actions without `_id`, in requests of at most BULK_DOCS documents / BULK_BYTES."""
        action = json.dumps({"index": {"_index": self._index}})
        lines: list[str] = []
        size = 0
        for doc in docs:
            line = json.dumps(dict(doc, write_id=new_write_id()), separators=(",", ":"))
            if lines and (len(lines) // 2 >= BULK_DOCS or size + len(line) > BULK_BYTES):
                self._bulk(lines, len(lines) // 2)
                lines, size = [], 0
            lines += [action, line]
            size += len(line) + len(action) + 2
        if lines:
            self._bulk(lines, len(lines) // 2)

    def _delete_ids(self, ids: Sequence[str]) -> int:
        """Bulk `delete` by `_id`; how many were deleted (an id already gone answers not_found: not counted)."""
        deleted = 0
        for start in range(0, len(ids), PAGE):
            part = ids[start : start + PAGE]
            lines = [json.dumps({"delete": {"_index": self._index, "_id": i}}) for i in part]
            deleted += sum(1 for r in self._bulk(lines, len(part)) if r["delete"].get("result") == "deleted")
        return deleted

    def _ids(self, clauses: list[dict[str, Any]]) -> list[str]:
        body = {"_source": False, "query": {"bool": {"filter": clauses}}, "sort": _BY_COPY}
        return [h["_id"] for h in self._pages(body)]

    def _delete_where(self, clauses: list[dict[str, Any]]) -> int:
        """What a delete_by_query would do, in the two steps the collection allows (ids, then deletes)."""
        return self._delete_ids(self._ids(clauses))

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
        ids = list(latest)
        for start in range(0, len(ids), PAGE):
            self._delete_where([{"term": {"org": org}}, {"terms": {"chunk_id": ids[start : start + PAGE]}}])
        self._index_docs(docs)

    def delete_item(self, org: str, database: str, collection: str, store: Store, item_id: str) -> int:
        return self._delete_where(self._item(org, ItemKey(database, collection, store, item_id)))

    def replace_items(self, org: str, items: Sequence[ItemKey], chunks: Sequence[ChunkDoc]) -> None:
        latest: dict[str, ChunkDoc] = {c.chunk_id: c for c in chunks}
        docs = [self._source(org, c) for c in latest.values()]
        for item in items:  # OpenSearch has no multi-document transaction: deletes, then the bulk writes
            self._delete_where(self._item(org, item))
        if docs:
            self._ensure_index()
            self._index_docs(docs)

    def delete_scope(self, org: str, database: str, collection: str | None) -> int:
        clauses = self._scope(org, database)
        if collection is not None:
            clauses.append({"term": {"collection": collection}})
        return self._delete_where(clauses)

    def settle_item(self, org: str, item: ItemKey, version: str) -> int:
        """Delete the visible copies of the item a reader must not see, once the caller has checked that
        `version` is current: chunks of an older version (written before a delete could see them) and all
        but the newest copy of each chunk (a re-sent bulk, a metadata update). Answers the number of
        distinct chunks of `version` searches see now. Newer versions are left alone."""
        body = {"_source": ["chunk_id", "version", "write_id"], "query": {"bool": {"filter": self._item(org, item)}}}
        keep: dict[str, tuple[str, str]] = {}  # chunk_id -> (write_id, _id) of the newest copy
        drop: list[str] = []
        for h in self._pages(dict(body, sort=_BY_COPY)):
            src = h["_source"]
            v = str(src.get("version") or "")
            if v < version:
                drop.append(h["_id"])
            elif v == version:
                have = keep.get(src["chunk_id"])
                write_id = str(src.get("write_id") or "")
                if have is None or write_id > have[0]:
                    if have is not None:
                        drop.append(have[1])
                    keep[src["chunk_id"]] = (write_id, h["_id"])
                else:
                    drop.append(h["_id"])
        self._delete_ids(drop)
        return len(keep)

    def keyword_search(self, org: str, flt: SearchFilter, query: str, *, limit: int, operator: str = "or") -> list[Hit]:
        if operator not in ("or", "and", "phrase"):
            raise ValueError(f"unknown keyword operator {operator!r}; use 'or', 'and' or 'phrase'")
        words = query_words(query) if operator != "phrase" else phrase_words(query)
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

    def vector_search(
        self, org: str, flt: SearchFilter, vector: npt.NDArray[np.float32], *, limit: int, narrow: bool = False
    ) -> list[Hit]:
        # `narrow` is not passed on: OpenSearch Serverless's k-NN query takes no per-query search breadth.
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
        """The newest copy of each chunk (any number of stale copies of a chunk_id are paged through)."""
        wanted = list(dict.fromkeys(chunk_ids))
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(wanted), PAGE):
            part = wanted[start : start + PAGE]
            body = {
                "_source": _DOC_SOURCE,
                "query": {"bool": {"filter": [{"term": {"org": org}}, {"terms": {"chunk_id": part}}]}},
                "sort": _BY_COPY,
            }
            found.update(newest_copies(self._pages(body)))
        return [chunk_doc(found[c]) for c in wanted if c in found]

    def item_chunks(self, org: str, database: str, collection: str, store: Store, item_id: str) -> list[ChunkDoc]:
        """The item's chunks of the newest version searches see, one copy each, in position order."""
        body = {
            "_source": _DOC_SOURCE,
            "query": {"bool": {"filter": self._item(org, ItemKey(database, collection, store, item_id))}},
            "sort": [{"position": "asc"}, *_BY_COPY],
        }
        found = newest_copies(self._pages(body))
        newest = max((str(s.get("version") or "") for s in found.values()), default="")
        return [chunk_doc(s) for s in found.values() if str(s.get("version") or "") == newest]

    def count(self, org: str, database: str, store: Store) -> int:
        """Documents searches see: exact once writes are visible and settled (a second copy counts until
        settle_item or the next replace of its item deletes it)."""
        try:
            body = {"query": {"bool": {"filter": self._scope(org, database, store)}}}
            resp = self._call(self._os.count, index=self._index, body=body)
        except NotFoundError:
            return 0
        return int(resp["count"])
