"""The ingestion of one item: parse -> chunk -> embed -> index -> graph -> completed.

Each step is idempotent for a given item version, so a retried or duplicated
job converges to the same state. Status moves queued -> processing ->
graph_creation (searchable from here) -> completed; errors end in errored.

Locally the work is two jobs: the index job (parse, chunk, embed, index: the item is searchable when it
ends) queues the graph job (relations, graph writes, completed), which the runner runs only when no
index job waits, so extraction never holds back searchability (docs/benchmarks.md, issue 15).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxstore import observability as obs
from ctxstore.domain.chunking import DEFAULT_WHOLE_BELOW, Chunk, chunk_id, chunk_markdown, embedding_input
from ctxstore.domain.conversation import Turn, pair_turns, turn_chunks
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.domain.items import (
    COMPLETED,
    ERRORED,
    GRAPH_CREATION,
    PROCESSING,
    TERMINAL,
    ItemRecord,
    ItemRef,
    ItemStatus,
)
from ctxstore.parsing import ParseError, parse_document
from ctxstore.pipeline.retry_policy import TransientError
from ctxstore.ports.blobs import BlobNotFound, BlobStore
from ctxstore.ports.embedder import Embedder
from ctxstore.ports.extractor import MemoryInferrer
from ctxstore.ports.search_index import ChunkDoc, ItemKey, SearchIndex
from ctxstore.ports.work_queue import Job
from ctxstore.services.items.locks import STEP_WAIT_SECONDS
from ctxstore.services.items.service import ItemService, StatusChange, StatusExtra

log = logging.getLogger("ctxstore.ingest")

PARSE_FAILED = "E3001"
STORAGE_ERROR = "E6001"
INFERRED_PREFIX = "Inferred from conversation: "

GraphStep = Callable[[str, ItemRef, ItemRecord, list[Chunk]], int]
QueueGraph = Callable[[str, Sequence[tuple[ItemRef, str]]], None]  # org, (item, version)s: start their graph jobs


@dataclass(frozen=True)
class PipelineConfig:
    chunk_size: int = 1200
    chunk_overlap: int = 150
    whole_below: int = DEFAULT_WHOLE_BELOW  # a document this short stays one chunk
    embed_batch: int = 64


@dataclass(frozen=True)
class Parsed:
    text: str  # the whole content (what inference reads)
    turns: list[Turn] | None = None  # a conversation memory: chunked one turn at a time


class StaleJob(Exception):
    """A newer ingest of the same item replaced this one; stop quietly."""


class IngestPipeline:
    def __init__(
        self,
        items: ItemService,
        *,
        blobs: Callable[[], BlobStore],
        search_index: Callable[[], SearchIndex | None],
        embedder: Callable[[], Embedder | None],
        inferrer: Callable[[], MemoryInferrer | None],
        config: PipelineConfig | None = None,
        graph_step: GraphStep | None = None,
        queue_graph: QueueGraph | None = None,
    ) -> None:
        """The ports are providers, read by the steps that use them (each Step Functions task builds the
        pipeline and runs one step; on AWS a port read builds its client). Each but `blobs` may be None where
        the deployment has none: no index or embedder fails the job as transient, no inferrer infers nothing."""
        self._blobs = blobs
        self._search_index = search_index
        self._embedder = embedder
        self._inferrer = inferrer
        self._items = items
        self._cfg = config or PipelineConfig()
        self._graph_step = graph_step
        self._queue_graph = queue_graph

    def _index(self) -> SearchIndex:
        """The search index of the publish and graph steps (which run after `vectors` has found one)."""
        idx = self._search_index()
        if idx is None:  # real: a deployment without an index; the job is retried, then errored
            raise TransientError("search index not configured")
        return idx

    # ---- entry points ----------------------------------------------------------------------
    def handle(self, job: Job) -> None:
        """Local runner handler. Raises TransientError for the runner to retry."""
        ref = ItemRef.from_json(job.payload["ref"])
        version = str(job.payload["version"])
        try:
            self.run(job.org, ref, version, attempt=job.attempts)
        except StaleJob:
            return
        except StoreUnavailable as exc:
            raise TransientError(str(exc)) from exc

    def handle_graph(self, job: Job) -> None:
        """Local runner handler of the graph queue: the graph step of a published version, then completed."""
        ref = ItemRef.from_json(job.payload["ref"])
        version = str(job.payload["version"])
        try:
            self.graph_and_complete(job.org, ref, version)
        except StaleJob:
            return
        except StoreUnavailable as exc:
            raise TransientError(str(exc)) from exc

    def on_give_up(self, job: Job, error: str) -> None:
        """After the last retry: the item ends in errored with the storage code."""
        self.fail(job.org, ItemRef.from_json(job.payload["ref"]), str(job.payload["version"]), error)

    def run(self, org: str, ref: ItemRef, version: str, *, attempt: int = 1) -> None:
        """The index job: every step up to searchable, then the graph step is queued (or run inline when no
        graph queue is wired). Step Functions runs the same steps one Task each."""
        record = self.begin(org, ref, version, attempt=attempt)
        if record is None:
            return
        chunks = self.parse_and_chunk(org, ref, version, record)
        if chunks is None:
            return
        docs = self.embed(org, ref, record, chunks)
        self.publish(org, ref, version, docs)
        self.hand_to_graph(org, ref, version, chunks)

    def hand_to_graph(self, org: str, ref: ItemRef, version: str, chunks: list[Chunk]) -> None:
        """After publish: the item's graph job is queued, or, with no graph queue, its graph step runs here."""
        if self.queues_graph:
            self.queue_graphs(org, [(ref, version)])
            return
        self.complete(org, ref, version, self.graph(org, ref, version, chunks))

    @property
    def queues_graph(self) -> bool:
        """Whether a published item's graph step runs as its own job (else hand_to_graph runs it inline)."""
        return self._graph_step is not None and self._queue_graph is not None

    def queue_graphs(self, org: str, items: Sequence[tuple[ItemRef, str]]) -> None:
        """Start the graph jobs of several published (item, version)s of one org in one write."""
        assert self._queue_graph is not None
        self._queue_graph(org, items)

    def graph_and_complete(self, org: str, ref: ItemRef, version: str) -> None:
        """The graph job: the item's chunks as indexed for this version feed the graph step."""
        record = self.current(org, ref, version)
        if record is None:
            raise StaleJob()
        if record["status"] in TERMINAL:
            return  # a duplicate of a finished job
        relations = self.graph(org, ref, version, self.indexed_chunks(org, ref))
        self.complete(org, ref, version, relations)

    def indexed_chunks(self, org: str, ref: ItemRef) -> list[Chunk]:
        """The item's chunks as its index job published them (what its graph step reads)."""
        docs = self._index().item_chunks(org, ref.database, ref.collection, ref.store, ref.item_id)  # type: ignore[arg-type]
        return [Chunk(d.chunk_id, d.position, d.text, "") for d in docs]

    # ---- stages (each one Task of statemachines/ingest.asl.json) -------------------------------
    def begin(self, org: str, ref: ItemRef, version: str, *, attempt: int = 1) -> ItemRecord | None:
        """Load the item at this version and mark it processing; None for a duplicate of a finished job.

        Raises StaleJob (replaced or deleted) or TransientError (record not visible yet)."""
        record = self._load(org, ref, version, attempt)
        if record["status"] in TERMINAL:
            return None
        self._set(org, ref, version, PROCESSING)
        return record

    def begin_many(self, org: str, jobs: Sequence[tuple[ItemRef, str, int]]) -> list[ItemRecord | Exception | None]:
        """begin() for a worker's batch of (item, version, attempt) of one org: each record loaded as begin()
        loads it, then every live one marked processing in one status write (a write per item cost about as
        much as its share of the batch's index write). Per job: its record, None, or what begin() raises."""
        loaded: list[ItemRecord | Exception | None] = []
        for ref, version, attempt in jobs:
            try:
                record = self._load(org, ref, version, attempt)
            except Exception as exc:
                loaded.append(exc)
                continue
            loaded.append(None if record["status"] in TERMINAL else record)
        todo = [i for i, rec in enumerate(loaded) if rec is not None and not isinstance(rec, Exception)]
        moved = self._items.set_statuses(org, [StatusChange(jobs[i][0], jobs[i][1], PROCESSING) for i in todo])
        for i, ok in zip(todo, moved, strict=True):
            if not ok:
                loaded[i] = StaleJob()
        return loaded

    def parse_and_chunk(self, org: str, ref: ItemRef, version: str, record: ItemRecord) -> list[Chunk] | None:
        """Chunks of the item's text; None when the document cannot be parsed (the item is then errored)."""
        try:
            with step("parse"):
                parsed = self.parse(org, record)
        except ParseError as exc:
            self._set(org, ref, version, ERRORED, error_code=exc.code or PARSE_FAILED, error_message=str(exc))
            return None
        with step("chunk"):
            return self.chunk(ref, record, parsed)

    def publish(self, org: str, ref: ItemRef, version: str, docs: list[ChunkDoc]) -> None:
        """Index the chunks and mark the item graph_creation (searchable from here): one write of them all."""
        self.publish_batches(org, ref, version, [docs])

    def publish_batches(self, org: str, ref: ItemRef, version: str, batches: Iterable[Sequence[ChunkDoc]]) -> int:
        """publish() for an item whose chunks arrive in batches (the Step Functions Index step streams them
        from the work prefix, never holding them all); answers how many chunks were indexed.

        The call shape on the index: `delete_item` once (the item's old chunks), then one `upsert` per batch
        (each at most PUBLISH_DOCS chunks / PUBLISH_BYTES when built by publish_groups.bounded_batches). A
        retry repeats the whole sequence, so it converges. Under the item's lock, and only while the record
        still names this version: a replaced or deleted item gets nothing written (StaleJob). Metadata comes
        from the record as it is now, so a PATCH that landed while this version was parsed and embedded is not
        undone."""
        idx = self._index()
        with self._items.lock(org, ref, wait_s=STEP_WAIT_SECONDS), step("index"):
            record = self.current(org, ref, version)
            if record is None:
                raise StaleJob()
            md, amd = dict(record["metadata"] or {}), dict(record["additional_metadata"] or {})
            idx.delete_item(org, ref.database, ref.collection, ref.store, ref.item_id)  # type: ignore[arg-type]
            count = 0
            for batch in batches:
                if batch:
                    idx.upsert(org, [_with_metadata(d, md, amd) for d in batch])
                    count += len(batch)
            self._set(org, ref, version, GRAPH_CREATION, extra={"chunk_count": count})
        return count

    def publish_many(self, org: str, items: Sequence[tuple[ItemRef, str, list[ChunkDoc]]]) -> list[bool]:
        """publish() for several (item, version, chunks) of one org under their locks, in one index write
        and one status write; False for an item replaced or deleted meanwhile (nothing of it is written)."""
        with self._items.lock_many(org, [ref for ref, _, _ in items], wait_s=STEP_WAIT_SECONDS), step("index"):
            current = [self.current(org, ref, version) for ref, version, _ in items]
            live = [(item, rec) for item, rec in zip(items, current, strict=True) if rec is not None]
            docs: list[ChunkDoc] = []
            for (_, _, item_docs), rec in live:
                md, amd = dict(rec["metadata"] or {}), dict(rec["additional_metadata"] or {})
                docs += [_with_metadata(d, md, amd) for d in item_docs]
            idx = self._index()
            keys = [ItemKey(r.database, r.collection, r.store, r.item_id) for (r, _, _), _ in live]  # type: ignore[arg-type]
            idx.replace_items(org, keys, docs)
            changes = [StatusChange(r, v, GRAPH_CREATION, StatusExtra(chunk_count=len(d))) for (r, v, d), _ in live]
            moved = iter(self._items.set_statuses(org, changes))
        return [rec is not None and next(moved) for rec in current]

    def graph(self, org: str, ref: ItemRef, version: str, chunks: list[Chunk]) -> int:
        """Relations created by the graph step (0 when none is configured); nothing for a stale version."""
        if not self._graph_step:
            return 0
        with self._items.lock(org, ref, wait_s=STEP_WAIT_SECONDS):
            record = self.current(org, ref, version)
            if record is None:
                raise StaleJob()
            with step("graph"):
                return self._graph_step(org, ref, record, chunks)

    def complete(self, org: str, ref: ItemRef, version: str, relations: int) -> None:
        self._set(org, ref, version, COMPLETED, extra={"relations_created": relations})

    def fail(self, org: str, ref: ItemRef, version: str, error: str) -> bool:
        """After the last retry: the item ends in errored with the storage code (False if it was replaced)."""
        return self._items.set_status(org, ref, version, ERRORED, error_code=STORAGE_ERROR, error_message=error[:500])

    # ---- steps -----------------------------------------------------------------------------
    def parse(self, org: str, record: ItemRecord) -> Parsed:
        try:
            data = self._blobs().get(org, str(record["blob_key"]))
        except BlobNotFound:
            raise StaleJob() from None  # replaced by a newer version whose upload removed ours
        if record["source_type"] == "file":
            return Parsed(parse_document(str(record["title"]), data, str(record["ext"])).text)
        body = json.loads(data)
        if body.get("pairs"):
            speaker = body.get("user_name") or "User"
            exchanges = [
                f"{speaker}: {p.get('user') or ''}\nAssistant: {p.get('assistant') or ''}".strip()
                for p in body["pairs"]
            ]
            return Parsed("\n\n".join(exchanges), pair_turns(body["pairs"], body.get("user_name")))
        text = str(body.get("text") or "")
        title = str(record["title"] or "")
        heading = title and record["source_type"] == "app" and not _opens_with(text, title)
        return Parsed(f"# {title}\n\n{text}" if heading else text)

    def chunk(self, ref: ItemRef, record: ItemRecord, parsed: Parsed) -> list[Chunk]:
        scope = ref.pk
        text = parsed.text
        if parsed.turns:
            chunks = turn_chunks(ref.item_id, parsed.turns, scope=scope, size=self._cfg.chunk_size)
        else:
            chunks = chunk_markdown(
                ref.item_id,
                text,
                size=self._cfg.chunk_size,
                overlap=self._cfg.chunk_overlap,
                scope=scope,
                whole_below=self._cfg.whole_below,
            )
        inferrer = self._inferrer() if record["infer"] else None
        if inferrer is not None:  # real: a deployment without an inference model infers nothing
            inferred = inferrer.infer_memories([text], record["user_name"])
            base = len(chunks)
            chunks += [
                Chunk(
                    chunk_id(ref.item_id, base + i, INFERRED_PREFIX + s, scope),
                    base + i,
                    INFERRED_PREFIX + s,
                    "inferred",
                )
                for i, s in enumerate(inferred)
            ]
        return chunks

    def embed(self, org: str, ref: ItemRef, record: ItemRecord, chunks: list[Chunk]) -> list[ChunkDoc]:
        return self.embed_many(org, [(ref, record, chunks)])[0]

    def embed_many(self, org: str, items: Sequence[tuple[ItemRef, ItemRecord, list[Chunk]]]) -> list[list[ChunkDoc]]:
        """embed() for several items of one org: their chunks' vectors come from one index read and one embedder
        call (vectors_many); each item's documents as embed() builds them."""
        vectors = self.vectors_many(org, [(record, chunks) for _, record, chunks in items])
        return [self.documents(ref, rec, chunks, v) for (ref, rec, chunks), v in zip(items, vectors, strict=True)]

    @property
    def embed_batch(self) -> int:
        return self._cfg.embed_batch

    def vectors(self, org: str, record: ItemRecord, chunks: list[Chunk]) -> dict[str, npt.NDArray[np.float32]]:
        """A vector per chunk id: reused from the index when the chunk (same id, same text) is there already."""
        return self.vectors_many(org, [(record, chunks)])[0]

    def vectors_many(
        self, org: str, items: Sequence[tuple[ItemRecord, list[Chunk]]]
    ) -> list[dict[str, npt.NDArray[np.float32]]]:
        """vectors() for several items of one org: the reusable ones read in one call, the rest embedded in
        calls of `embed_batch` texts across the items (the embedder tokenizes a call's texts together)."""
        idx = self._search_index()
        embedder = self._embedder()
        if idx is None or embedder is None:  # real: a deployment may lack either; the job is retried, then errored
            raise TransientError("search index or embedder not configured")
        ids = [c.id for _, chunks in items for c in chunks]
        known = {d.chunk_id: d.vector for d in idx.get_chunks(org, ids) if d.vector is not None}
        todo: dict[str, str] = {}  # chunk id -> embedding input (a chunk id names its text)
        for record, chunks in items:
            title = str(record["title"] or "")
            todo.update((c.id, embedding_input(title, c)) for c in chunks if c.id not in known)
        pending = list(todo.items())
        for start in range(0, len(pending), self._cfg.embed_batch):
            batch = pending[start : start + self._cfg.embed_batch]
            with step("embed"):
                vectors = embedder.embed_documents([text for _, text in batch])
            known.update((chunk, v) for (chunk, _), v in zip(batch, vectors, strict=True))
        return [{c.id: known[c.id] for c in chunks} for _, chunks in items]

    def documents(
        self,
        ref: ItemRef,
        record: ItemRecord,
        chunks: list[Chunk],
        vectors: dict[str, npt.NDArray[np.float32]],
        *,
        inferred: bool | None = None,
    ) -> list[ChunkDoc]:
        """`inferred`: whether the item has inferred chunks, when `chunks` is one batch of it (else derived)."""
        title = str(record["title"] or "")
        md = dict(record["metadata"] or {})
        amd = dict(record["additional_metadata"] or {})
        if inferred if inferred is not None else has_inferred(chunks):
            amd.setdefault("inferred_available", True)
        return [
            ChunkDoc(
                chunk_id=c.id,
                item_id=ref.item_id,
                database=ref.database,
                collection=ref.collection,
                store=ref.store,  # type: ignore[arg-type]
                text=c.text,
                vector=vectors[c.id],
                title=title,
                source_type=str(record["source_type"] or ""),
                created_at=float(record["timestamp"] or record["created_at"] or 0.0),
                metadata=md,
                additional_metadata=amd,
                position=c.position,
                version=str(record["version"] or ""),
            )
            for c in chunks
        ]

    # ---- helpers ---------------------------------------------------------------------------
    def current(self, org: str, ref: ItemRef, version: str) -> ItemRecord | None:
        """The item's record while it is still at `version` (None once replaced or deleted)."""
        rec = self._items.get(org, ref)
        if rec is None or str(rec.data["version"]) != version:
            return None
        return rec.data

    def _load(self, org: str, ref: ItemRef, version: str, attempt: int) -> ItemRecord:
        rec = self._items.get(org, ref)
        if attempt == 1 and (rec is None or str(rec.data["version"]) < version):
            # A worker woken by the enqueue can get here before the accept, which holds the item's lock,
            # writes the record: wait for that lock once rather than retry a second later.
            with self._items.lock(org, ref, wait_s=STEP_WAIT_SECONDS):
                rec = self._items.get(org, ref)
        if rec is None:
            # The accept step writes the record right after starting the job; past the first retry a
            # missing record means the item was deleted (or its accept never finished).
            if attempt >= 3:
                raise StaleJob()
            raise TransientError("item record not visible yet")
        current = str(rec.data["version"])
        if current > version:
            raise StaleJob()
        if current < version:
            raise TransientError("item record not updated yet")
        return rec.data

    def _set(
        self,
        org: str,
        ref: ItemRef,
        version: str,
        status: ItemStatus,
        *,
        error_code: str | None = None,
        error_message: str | None = None,
        extra: StatusExtra | None = None,
    ) -> None:
        ok = self._items.set_status(
            org, ref, version, status, error_code=error_code, error_message=error_message, extra=extra
        )
        if not ok:
            raise StaleJob()


def step(name: str) -> AbstractContextManager[None]:
    """A pipeline step measured (ctxstore_pipeline_step_duration_seconds) and traced (span ingest.<step>)."""
    return obs.timed(obs.PIPELINE_STEP, f"ingest.{name}", step=name)


def has_inferred(chunks: Iterable[Chunk]) -> bool:
    return any(c.heading == "inferred" for c in chunks)


def _with_metadata(doc: ChunkDoc, metadata: dict[str, Any], additional: dict[str, Any]) -> ChunkDoc:
    amd = dict(additional)
    if "inferred_available" in doc.additional_metadata:
        amd.setdefault("inferred_available", doc.additional_metadata["inferred_available"])
    return replace(doc, metadata=dict(metadata), additional_metadata=amd)


def _opens_with(text: str, title: str) -> bool:
    """Whether the text's first line already is the title (a connector's page that starts with its own
    heading): a second copy would dilute a short item's embedding."""
    first = text.lstrip().split("\n", 1)[0]
    return first.lstrip("#").strip() == title.strip()
