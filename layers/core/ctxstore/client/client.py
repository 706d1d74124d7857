"""CtxstoreClient: the typed Python client of the ctxstore HTTP API (the CLI and `ctxstore mcp` use it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from ctxstore.client import documents as docs
from ctxstore.client.byog import ByogApi
from ctxstore.client.databases import DatabasesApi
from ctxstore.client.errors import MISSING_SCOPE, CtxstoreError
from ctxstore.client.models import (
    DeleteResult,
    Document,
    IngestItem,
    IngestResult,
    InspectResult,
    ItemStatus,
    QueryResult,
    Relations,
    SourcePage,
    Subgraph,
)
from ctxstore.client.status_polls import poll_oldest_first
from ctxstore.client.transport import Transport, form_fields
from ctxstore.client.urls import parse_base_url
from ctxstore.client.webhooks import WebhooksApi

Store = Literal["knowledge", "memory"]
STATUS_IDS_PER_CALL = 100
ITEMS_PER_REQUEST = 100


class CtxstoreClient:
    """A client for one ctxstore server and API key.

    ```python
    from ctxstore.client import CtxstoreClient

    with CtxstoreClient("http://127.0.0.1:8080", "csk_...", database="acme") as cs:
        accepted = cs.ingest_files(["handbook.pdf"])
        cs.wait_for(accepted.queued_ids)
        for chunk in cs.query("How many vacation days?").chunks:
            print(chunk.source_title, chunk.chunk_content)
    ```

    Every method that works inside a scope takes `database` and `collection`; when omitted, the defaults
    given here are used (no default database: CtxstoreError `INVALID_PARAMETERS` before any request).
    Failures raise `CtxstoreError` carrying the API's `error.code`; 429 and 503 answers are retried
    (bounded, honouring `Retry-After`) before they are raised.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        api_key: str | None = None,
        *,
        database: str | None = None,
        collection: str | None = None,
        timeout: float = 60.0,
        max_attempts: int = 5,
        max_retry_wait_s: float = 60.0,
        transport: Transport | None = None,
    ) -> None:
        self.base_url = parse_base_url(base_url).url  # `localhost:8080` means http://localhost:8080
        self.database = database
        self.collection = collection
        self._t = transport or Transport(
            self.base_url, api_key, timeout=timeout, max_attempts=max_attempts, max_retry_wait_s=max_retry_wait_s
        )
        self.databases = DatabasesApi(self._t)
        self.byog = ByogApi(self._t)
        self.webhooks = WebhooksApi(self._t)

    def close(self) -> None:
        self._t.close()

    def __enter__(self) -> CtxstoreClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- scope -----------------------------------------------------------------------------
    def _db(self, database: str | None) -> str:
        db = database or self.database
        if not db:
            raise CtxstoreError(MISSING_SCOPE, "no database: pass database=... or set a default database")
        return db

    def _col(self, collection: str | None) -> str | None:
        return collection if collection is not None else self.collection

    def _scope(self, database: str | None, collection: str | None) -> dict[str, str]:
        scope = {"database": self._db(database)}
        col = self._col(collection)
        if col is not None:
            scope["collection"] = col
        return scope

    # ---- service -----------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """`GET /health` (no key needed): `{"status": "ok", "api_version": ...}`."""
        out: dict[str, Any] = self._t.request("GET", "/health", envelope=False)
        return out

    # ---- ingest ------------------------------------------------------------------------------
    def ingest_files(
        self,
        files: Iterable[str | Path | Document],
        *,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        upsert: bool = True,
        database: str | None = None,
        collection: str | None = None,
    ) -> IngestResult:
        """Upload files as knowledge (one `document_metadata` entry per file if given). Returns at once with the
        ids queued; see `iter_ingest_files` for request-by-request results."""
        return IngestResult.merge(
            list(
                self.iter_ingest_files(
                    files, metadata=metadata, upsert=upsert, database=database, collection=collection
                )
            )
        )

    def iter_ingest_files(
        self,
        files: Iterable[str | Path | Document],
        *,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        upsert: bool = True,
        database: str | None = None,
        collection: str | None = None,
        max_request_bytes: int = docs.DEFAULT_BATCH_BYTES,
        max_request_files: int = docs.DEFAULT_BATCH_FILES,
    ) -> Iterator[IngestResult]:
        """Upload files in requests of bounded size, yielding each request's result (its files in the order given).

        A file larger than `max_request_bytes` goes by reference (`POST /context/uploads`, then its URL).
        A file over the API's 50 MB limit is never sent: it comes back as a `failed` item with error code
        `PAYLOAD_TOO_LARGE` (the API would refuse the whole request with 413).
        """
        scope = self._scope(database, collection)
        loaded = [docs.to_document(f) for f in files]
        metas = list(metadata) if metadata is not None else None
        if metas is not None and len(metas) != len(loaded):
            raise CtxstoreError(MISSING_SCOPE, f"{len(metas)} metadata entries for {len(loaded)} files")
        too_big = [d for d in loaded if len(d.data) > docs.MAX_FILE_BYTES]
        if too_big:
            yield _oversized_result(too_big)
        sendable = [
            (d, dict(metas[i]) if metas is not None else None)
            for i, d in enumerate(loaded)
            if len(d.data) <= docs.MAX_FILE_BYTES
        ]
        for batch in docs.batches(
            sendable, lambda pair: len(pair[0].data), max_bytes=max_request_bytes, max_files=max_request_files
        ):
            yield self._ingest_documents(batch, metas is not None, upsert, scope, max_request_bytes)

    def _ingest_documents(
        self,
        batch: list[tuple[Document, dict[str, Any] | None]],
        with_metadata: bool,
        upsert: bool,
        scope: dict[str, str],
        direct_limit: int,
    ) -> IngestResult:
        # The API takes file parts first, then referenced uploads, and answers in that order.
        order = [i for i, (d, _) in enumerate(batch) if len(d.data) <= direct_limit]
        order += [i for i, (d, _) in enumerate(batch) if len(d.data) > direct_limit]
        inline = [batch[i][0] for i in order if len(batch[i][0].data) <= direct_limit]
        by_ref = [batch[i][0] for i in order if len(batch[i][0].data) > direct_limit]
        form: dict[str, str] = {**scope, "type": "knowledge", "upsert": _bool(upsert)}
        if by_ref:
            form["uploads"] = json.dumps([{"upload_id": self._stage(d), "filename": d.filename} for d in by_ref])
        if with_metadata:
            form["document_metadata"] = json.dumps([batch[i][1] or {} for i in order])
        files = [("documents", (d.filename, d.data, d.content_type or "application/octet-stream")) for d in inline]
        result = IngestResult.model_validate(self._t.request("POST", "/context/ingest", data=form, files=files or None))
        if len(result.results) == len(batch):  # back in the caller's order
            by_position = dict(zip(order, result.results, strict=True))
            result.results = [by_position[i] for i in range(len(batch))]
        return result

    def _stage(self, doc: Document) -> str:
        """Send one large file to a presigned upload URL; its id for the ingest request's `uploads`."""
        body: dict[str, Any] = {"filename": doc.filename, "size_bytes": len(doc.data)}
        if doc.content_type:
            body["content_type"] = doc.content_type
        grant = self._t.request("POST", "/context/uploads", json=body)
        url = grant["url"] if "://" in grant["url"] else self.base_url + grant["url"]
        part = (doc.filename, doc.data, doc.content_type or "application/octet-stream")
        self._t.request(
            "POST", url, data=grant.get("fields") or {}, files=[(grant["file_field"], part)], absolute_url=True
        )
        return str(grant["upload_id"])

    def ingest_app_items(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        graph_payload: Mapping[str, Any] | None = None,
        upsert: bool = True,
        database: str | None = None,
        collection: str | None = None,
    ) -> IngestResult:
        """Ingest pre-extracted app items (`app_knowledge`: `{id, title, type, content: {text}, ...}`) as knowledge."""
        return self._ingest_json("knowledge", "app_knowledge", items, graph_payload, upsert, database, collection)

    def ingest_memories(
        self,
        memories: Sequence[Mapping[str, Any]],
        *,
        graph_payload: Mapping[str, Any] | None = None,
        upsert: bool = True,
        database: str | None = None,
        collection: str | None = None,
    ) -> IngestResult:
        """Ingest memories: each `{text}` or `{user_assistant_pairs: [{user, assistant}]}`, optionally `infer`,
        `title`, `user_name`, `id`, `metadata`, `additional_metadata`."""
        return self._ingest_json("memory", "memories", memories, graph_payload, upsert, database, collection)

    def _ingest_json(
        self,
        store: Store,
        field: str,
        items: Sequence[Mapping[str, Any]],
        graph_payload: Mapping[str, Any] | None,
        upsert: bool,
        database: str | None,
        collection: str | None,
    ) -> IngestResult:
        form = {
            **self._scope(database, collection),
            "type": store,
            "upsert": _bool(upsert),
            field: json.dumps(list(items)),
        }
        if graph_payload is not None:
            form["graph_payload"] = json.dumps(graph_payload)
        return IngestResult.model_validate(self._t.request("POST", "/context/ingest", files=form_fields(form)))

    def iter_ingest_items(
        self,
        store: Store,
        items: Sequence[Mapping[str, Any]],
        *,
        per_request: int = ITEMS_PER_REQUEST,
        upsert: bool = True,
        database: str | None = None,
        collection: str | None = None,
    ) -> Iterator[IngestResult]:
        """App items (`store="knowledge"`) or memories (`store="memory"`) in requests of `per_request` items."""
        field = "memories" if store == "memory" else "app_knowledge"
        for start in range(0, len(items), per_request):
            part = items[start : start + per_request]
            yield self._ingest_json(store, field, part, None, upsert, database, collection)

    # ---- status --------------------------------------------------------------------------------
    def status(
        self, ids: Sequence[str], *, database: str | None = None, collection: str | None = None
    ) -> list[ItemStatus]:
        """Indexing status of each id, in order. An id the server does not know (never ingested, rejected at
        upload, deleted) has `indexing_status=None` and `error_code="FILE_NOT_FOUND"`."""
        scope = self._scope(database, collection)
        by_id: dict[str, ItemStatus] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), STATUS_IDS_PER_CALL):
            part = wanted[start : start + STATUS_IDS_PER_CALL]
            try:
                data = self._t.request("GET", "/context/status", params={**scope, "ids": ",".join(part)})
                entries = [ItemStatus.model_validate(s) for s in data.get("statuses", [])]
            except CtxstoreError as exc:
                if exc.code != "FILE_NOT_FOUND":  # 404 FILE_NOT_FOUND: none of these ids is known
                    raise
                entries = [ItemStatus(id=i, error_code="FILE_NOT_FOUND", error_message=exc.message) for i in part]
            by_id.update((e.id, e) for e in entries)
        return [by_id.get(i) or ItemStatus(id=i, error_code="FILE_NOT_FOUND") for i in wanted]

    def wait_for(
        self,
        ids: Sequence[str],
        *,
        timeout: float = 600.0,
        poll_interval: float = 1.0,
        on_update: Callable[[list[ItemStatus]], None] | None = None,
        database: str | None = None,
        collection: str | None = None,
    ) -> list[ItemStatus]:
        """Poll `status` until every id is done (completed, errored or unknown) or `timeout` seconds pass.

        Returns the last statuses (check `.done` on each: after a timeout some are not). `on_update` sees the
        statuses known after each poll, for progress display. A poll asks for the ids not done oldest first
        and stops at the first call in which none is done (status_polls.py).
        """
        deadline = time.monotonic() + timeout
        wanted = list(dict.fromkeys(ids))
        ask = partial(self.status, database=database, collection=collection)
        final: dict[str, ItemStatus] = {}
        pending = wanted
        while True:
            pending = poll_oldest_first(ask, pending, final, STATUS_IDS_PER_CALL)
            if on_update is not None:
                on_update([final[i] for i in wanted if i in final])
            if not pending or time.monotonic() >= deadline:
                final.update((s.id, s) for s in ask([i for i in wanted if i not in final]))  # a poll never reached
                return [final[i] for i in wanted]
            time.sleep(poll_interval)

    # ---- items ---------------------------------------------------------------------------------
    def list_sources(
        self,
        *,
        type: Store = "knowledge",
        page: int = 1,
        page_size: int = 50,
        ids: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        database: str | None = None,
        collection: str | None = None,
    ) -> SourcePage:
        """One page of stored sources (knowledge) or memories, newest first (`POST /context/list`)."""
        body: dict[str, Any] = {**self._scope(database, collection), "type": type, "page": page, "page_size": page_size}
        if ids:
            body["ids"] = list(ids)
        if filters:
            body["filters"] = dict(filters)
        return SourcePage.model_validate(self._t.request("POST", "/context/list", json=body))

    def inspect(
        self,
        id: str,
        *,
        mode: Literal["content", "url", "both"] = "content",
        expiry_seconds: int = 3600,
        database: str | None = None,
        collection: str | None = None,
    ) -> InspectResult:
        """A source's original content (text) and/or a time-limited download URL (`GET /context/inspect`)."""
        params = {**self._scope(database, collection), "id": id, "mode": mode, "expiry_seconds": str(expiry_seconds)}
        return InspectResult.model_validate(self._t.request("GET", "/context/inspect", params=params))

    def chunks(
        self,
        id: str,
        *,
        type: Store | None = None,
        offset: int = 0,
        limit: int = 100,
        database: str | None = None,
        collection: str | None = None,
    ) -> dict[str, Any]:
        """An item's chunks in order (`GET /context/chunks`, a ctxstore addition)."""
        params: dict[str, Any] = {**self._scope(database, collection), "id": id, "offset": offset, "limit": limit}
        if type:
            params["type"] = type
        out: dict[str, Any] = self._t.request("GET", "/context/chunks", params=params)
        return out

    def delete(
        self,
        ids: Sequence[str],
        *,
        type: Store = "knowledge",
        database: str | None = None,
        collection: str | None = None,
    ) -> DeleteResult:
        """Delete items for good from every store (`DELETE /context`); per-id results say which existed."""
        body = {**self._scope(database, collection), "type": type, "ids": list(ids)}
        return DeleteResult.model_validate(self._t.request("DELETE", "/context", json=body))

    def update_metadata(
        self,
        id: str,
        *,
        database_metadata: Mapping[str, Any] | None = None,
        additional_metadata: Mapping[str, Any] | None = None,
        database: str | None = None,
        collection: str | None = None,
    ) -> dict[str, Any]:
        """Merge metadata into an item and its chunks (`PATCH /context/{id}/metadata`)."""
        body: dict[str, Any] = {"database": self._db(database), "collection": self._col(collection) or ""}
        if database_metadata is not None:
            body["database_metadata"] = dict(database_metadata)
        if additional_metadata is not None:
            body["additional_metadata"] = dict(additional_metadata)
        out: dict[str, Any] = self._t.request("PATCH", f"/context/{_path(id)}/metadata", json=body)
        return out

    # ---- retrieval -----------------------------------------------------------------------------
    def query(
        self,
        query: str,
        *,
        type: Literal["knowledge", "memory", "all"] | None = None,
        mode: Literal["fast", "thinking", "auto"] | None = None,
        max_results: int | None = None,
        query_by: Literal["hybrid", "text"] | None = None,
        operator: Literal["or", "and", "phrase"] | None = None,
        alpha: float | Literal["auto"] | None = None,
        metadata_filters: Mapping[str, Any] | None = None,
        graph_context: bool | None = None,
        recency_bias: float | None = None,
        collections: Sequence[str] | Mapping[str, float] | None = None,
        ids: Sequence[str] | None = None,
        extra: Mapping[str, Any] | None = None,
        database: str | None = None,
        collection: str | None = None,
    ) -> QueryResult:
        """Hybrid retrieval (`POST /query`): ranked chunks, de-duplicated sources, optional graph context.

        Unset knobs take the server's defaults; `extra` passes any other body field through.
        """
        body: dict[str, Any] = {"database": self._db(database), "query": query}
        if collections is not None:
            body["collections"] = dict(collections) if isinstance(collections, Mapping) else list(collections)
        elif self._col(collection) is not None:
            body["collection"] = self._col(collection)
        knobs = {
            "type": type,
            "mode": mode,
            "max_results": max_results,
            "query_by": query_by,
            "operator": operator,
            "alpha": alpha,
            "metadata_filters": dict(metadata_filters) if metadata_filters else None,
            "graph_context": graph_context,
            "recency_bias": recency_bias,
            "ids": list(ids) if ids else None,
        }
        body.update({k: v for k, v in knobs.items() if v is not None})
        body.update(extra or {})
        return QueryResult.model_validate(self._t.request("POST", "/query", json=body))

    def relations(
        self,
        id: str | None = None,
        *,
        type: Store = "knowledge",
        limit: int | None = None,
        cursor: str | None = None,
        acl: Sequence[str] | None = None,
        database: str | None = None,
        collection: str | None = None,
    ) -> Relations:
        """Entity relations of one item, or of the whole collection when `id` is None (`GET /context/relations`)."""
        params: list[tuple[str, str]] = [*self._scope(database, collection).items(), ("type", type)]
        params += [(k, str(v)) for k, v in (("id", id), ("limit", limit), ("cursor", cursor)) if v is not None]
        params += [("acl", a) for a in acl or ()]
        return Relations.model_validate(self._t.request("GET", "/context/relations", params=params))

    def subgraph(
        self,
        id: str,
        *,
        type: Store = "knowledge",
        depth: int | None = None,
        max_sources: int | None = None,
        acl: Sequence[str] | None = None,
        database: str | None = None,
        collection: str | None = None,
    ) -> Subgraph:
        """Items linked to `id` (thread, parent/child, explicit links), breadth first (`GET /context/subgraph`)."""
        params: list[tuple[str, str]] = [*self._scope(database, collection).items(), ("id", id), ("type", type)]
        params += [(k, str(v)) for k, v in (("depth", depth), ("max_sources", max_sources)) if v is not None]
        params += [("acl", a) for a in acl or ()]
        return Subgraph.model_validate(self._t.request("GET", "/context/subgraph", params=params))


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _path(segment: str) -> str:
    return quote(segment, safe="")


def _oversized_result(files: list[Document]) -> IngestResult:
    results = [
        IngestItem(
            id="",
            filename=d.filename,
            title=d.filename,
            status="failed",
            error=f"file is {len(d.data)} bytes; the limit is 50 MB per file (not sent)",
            error_code="PAYLOAD_TOO_LARGE",
        )
        for d in files
    ]
    return IngestResult(success=False, message="files over 50 MB", failed_count=len(results), results=results)
