"""Ingestion as separate Step Functions tasks: the pipeline's stages, one call each, JSON in and out.

statemachines/ingest.asl.json runs parse -> embed (a Map over chunk batches) -> index -> graph ->
complete, with errored as the Catch target; each functions/ingest_<step>/app.py calls one method here.
A task's input and output stay small (Step Functions caps state at 256 KB): chunk texts and vectors
travel through the blob store under the item version's work prefix, removed when the item finishes.
Work layout, so that no task holds or reads more than it needs (a 50 MB file is ~20k chunks):
``manifest.json`` (chunk count, batch size, whether any chunk is inferred), ``chunks/<start>.json`` and
``vectors/<start>.npy`` per Embed batch. An Embed task reads its own batch only; Index streams batch
after batch into the index in bounded upserts (IngestPipeline.publish_batches).

Every task is idempotent for an item version, so a retried or duplicated task converges. A stale
version (replaced or deleted item) answers ``{"outcome": "stop"}`` and the machine ends quietly;
storage faults raise TransientError, whose class name is the error Step Functions retries on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxstore.domain.chunking import Chunk
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.domain.items import ItemRecord, ItemRef
from ctxstore.pipeline.ingest_pipeline import IngestPipeline, StaleJob, has_inferred
from ctxstore.pipeline.jobs import ingest_pipeline
from ctxstore.pipeline.publish_groups import bounded_batches
from ctxstore.pipeline.retry_policy import TransientError
from ctxstore.pipeline.search_visibility import SearchVisibility
from ctxstore.ports.blobs import BlobNotFound, BlobStore
from ctxstore.ports.search_index import ChunkDoc, ItemKey, SearchIndex
from ctxstore.services.registry import Services

CONTINUE = {"outcome": "continue"}
STOP = {"outcome": "stop"}
MANIFEST = "manifest.json"
# Chunks per Embed task (the Map's items). Bedrock embeds one text per request, a few in flight, so a batch
# this size takes seconds; fewer, larger batches mean fewer Lambda invocations, S3 requests and state
# transitions per file (a 50 MB file is ~20k chunks: 76 tasks, not 301). The embedder itself is still
# called PipelineConfig.embed_batch texts at a time.
WORK_BATCH = 256
_JSON = "application/json"


@dataclass(frozen=True)
class Task:
    """The fields every task input carries (built by the ASL from the execution input)."""

    org: str
    ref: ItemRef
    version: str
    attempt: int

    @staticmethod
    def of(event: dict[str, Any]) -> Task:
        item = event.get("payload", event)  # MarkErrored gets the whole execution state
        return Task(
            org=str(event["org"]),
            ref=ItemRef.from_json(item["ref"]),
            version=str(item["version"]),
            attempt=int(event.get("retry_count", 0)) + 1,
        )


def _transient(fn: Any) -> Any:
    """Storage faults become TransientError (the retried error); a stale item stops the machine."""

    def wrapped(self: IngestSteps, event: dict[str, Any]) -> dict[str, Any]:
        try:
            result: dict[str, Any] = fn(self, event)
        except StaleJob:
            self._cleanup(str(event["org"]), event.get("work"))
            return dict(STOP)
        except StoreUnavailable as exc:
            raise TransientError(str(exc)) from exc
        return result

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


class IngestSteps:
    def __init__(
        self,
        pipeline: IngestPipeline,
        blobs: BlobStore,
        *,
        search: Callable[[], SearchIndex | None] = lambda: None,
        visibility: SearchVisibility | None = None,
    ) -> None:
        self._p = pipeline
        self._blobs = blobs
        self._search = search  # looked up by the Complete task only: the other tasks never build the client
        self._visibility = visibility or SearchVisibility()

    # ---- tasks -----------------------------------------------------------------------------
    @_transient
    def parse(self, event: dict[str, Any]) -> dict[str, Any]:
        """Mark processing, parse and chunk; each batch's chunks go to the work prefix, the batches to the Map."""
        t = Task.of(event)
        record = self._p.begin(t.org, t.ref, t.version, attempt=t.attempt)
        if record is None:
            return dict(STOP)
        chunks = self._p.parse_and_chunk(t.org, t.ref, t.version, record)
        if chunks is None:  # unparseable: the item is errored with the parser's code
            return dict(STOP)
        work = _work_prefix(record)
        plan = WorkPlan(len(chunks), WORK_BATCH, has_inferred(chunks))
        for start, end in plan.batches():
            body = [[c.id, c.position, c.text, c.heading, c.context] for c in chunks[start:end]]
            self._blobs.put(t.org, _chunks_key(work, start), json.dumps(body).encode(), content_type=_JSON)
        # Written last: a retried Parse that stopped half-way rewrites every batch before Embed can start.
        self._blobs.put(t.org, work + MANIFEST, json.dumps(plan.to_json()).encode(), content_type=_JSON)
        batches = [{"start": s, "end": e} for s, e in plan.batches()]
        return {**CONTINUE, "work": work, "chunks": len(chunks), "batches": batches}

    @_transient
    def embed(self, event: dict[str, Any]) -> dict[str, Any]:
        """Vectors of one batch of chunks (read alone), stored as one .npy under the work prefix."""
        t = Task.of(event)
        record = self._record(t)
        work = str(event["work"])
        start, end = int(event["batch"]["start"]), int(event["batch"]["end"])
        chunks = self._batch(t.org, work, start, end)
        vectors = self._p.vectors(t.org, record, chunks)
        matrix = np.stack([np.asarray(vectors[c.id], dtype=np.float32) for c in chunks]) if chunks else np.zeros(0)
        buf = io.BytesIO()
        np.save(buf, matrix, allow_pickle=False)
        self._blobs.put(t.org, _batch_key(work, start), buf.getvalue())
        return {"embedded": len(chunks)}

    @_transient
    def index(self, event: dict[str, Any]) -> dict[str, Any]:
        """Replace the item's chunks in the search index, one batch of chunks and vectors at a time; the item
        becomes graph_creation (searchable)."""
        t = Task.of(event)
        record = self._record(t)
        work = str(event["work"])
        plan = self._plan(t.org, work)
        docs = self._documents(t, record, work, plan)
        count = self._p.publish_batches(t.org, t.ref, t.version, bounded_batches(docs))
        return {**CONTINUE, "chunks": count}

    @_transient
    def graph(self, event: dict[str, Any]) -> dict[str, Any]:
        """The graph step (graph_payload or extraction); answers how many relations it created."""
        t = Task.of(event)
        self._record(t)  # a stale version stops here, before its chunks are read
        work = str(event["work"])
        plan = self._plan(t.org, work)
        chunks = [c for start, end in plan.batches() for c in self._batch(t.org, work, start, end)]
        return {"relations": self._p.graph(t.org, t.ref, t.version, chunks)}

    @_transient
    def complete(self, event: dict[str, Any]) -> dict[str, Any]:
        """The item becomes completed once a search sees its chunks (search_visibility.py)."""
        t = Task.of(event)
        self._await_searchable(t)
        self._p.complete(t.org, t.ref, t.version, int(event.get("relations") or 0))
        self._cleanup(t.org, event.get("work"))
        return {"outcome": "completed"}

    def errored(self, event: dict[str, Any]) -> dict[str, Any]:
        """Catch target (input: the whole execution state with ``error``): the item ends errored with E6001 and
        the last error, like the local runner's give-up."""
        t = Task.of(event)
        error = event.get("error") or {}
        name, message = str(error.get("Error") or "States.TaskFailed"), str(error.get("Cause") or "")
        try:
            cause = json.loads(message)
            message = str(cause.get("errorMessage") or message)
        except (ValueError, AttributeError):
            pass
        code = "E6001" if name in (TransientError.__name__, "E6001") else name
        try:
            self._p.fail(t.org, t.ref, t.version, f"{code}: {message}")
        except StoreUnavailable as exc:
            raise TransientError(str(exc)) from exc
        self._cleanup(t.org, (event.get("parsed") or {}).get("work"))
        return {"outcome": "errored"}

    # ---- helpers ---------------------------------------------------------------------------
    def _await_searchable(self, t: Task) -> None:
        record = self._record(t)
        key = ItemKey(t.ref.database, t.ref.collection, t.ref.store, t.ref.item_id)  # type: ignore[arg-type]
        chunks = int(record["chunk_count"] or 0)
        self._visibility.await_searchable(self._search(), t.org, key, t.version, chunks)

    def _record(self, t: Task) -> ItemRecord:
        record = self._p.current(t.org, t.ref, t.version)
        if record is None:
            raise StaleJob()
        return record

    def _documents(self, t: Task, record: ItemRecord, work: str, plan: WorkPlan) -> Iterator[ChunkDoc]:
        """The item's index documents, read one batch of chunks and vectors at a time."""
        for start, end in plan.batches():
            chunks = self._batch(t.org, work, start, end)
            matrix = self._load_batch(t.org, work, start)
            vectors = {c.id: v for c, v in zip(chunks, matrix, strict=True)}
            yield from self._p.documents(t.ref, record, chunks, vectors, inferred=plan.inferred)

    def _plan(self, org: str, work: str) -> WorkPlan:
        try:
            return WorkPlan.from_json(json.loads(self._blobs.get(org, work + MANIFEST)))
        except BlobNotFound:
            pass
        # Work written before batches had objects of their own (an execution in flight across a deploy).
        chunks = self._legacy_chunks(org, work)
        return WorkPlan(len(chunks), self._p.embed_batch, has_inferred(chunks))

    def _batch(self, org: str, work: str, start: int, end: int) -> list[Chunk]:
        """The chunks of one batch: its own object only."""
        try:
            raw = json.loads(self._blobs.get(org, _chunks_key(work, start)))
        except BlobNotFound:
            return self._legacy_chunks(org, work)[start:end]
        chunks = [_chunk(r) for r in raw]
        if len(chunks) != end - start:
            raise ValueError(f"work batch {start} holds {len(chunks)} chunks, expected {end - start}")
        return chunks

    def _legacy_chunks(self, org: str, work: str) -> list[Chunk]:
        try:
            raw = json.loads(self._blobs.get(org, work + "chunks.json"))
        except BlobNotFound:
            raise StaleJob() from None  # the item was deleted (its blobs went with it)
        return [_chunk(r) for r in raw]

    def _load_batch(self, org: str, work: str, start: int) -> Any:
        try:
            data = self._blobs.get(org, _batch_key(work, start))
        except BlobNotFound:
            raise StaleJob() from None
        return np.load(io.BytesIO(data), allow_pickle=False)

    def _cleanup(self, org: str, work: object) -> None:
        if isinstance(work, str) and work:
            self._blobs.delete_prefix(org, work)


def _work_prefix(record: ItemRecord) -> str:
    """Next to the item version's upload, so deleting the item's (or database's) blobs removes it too."""
    return f"{record['blob_key']}.work/"


def _batch_key(work: str, start: int) -> str:
    return f"{work}vectors/{start:08d}.npy"


def _chunks_key(work: str, start: int) -> str:
    return f"{work}chunks/{start:08d}.json"


def _chunk(r: list[Any]) -> Chunk:
    # The context (5th field) is absent from work files written before it existed.
    return Chunk(str(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]) if len(r) > 4 else "")


@dataclass(frozen=True)
class WorkPlan:
    """How an item version's chunks are split into Embed batches (the work prefix's manifest)."""

    chunks: int
    batch_size: int
    inferred: bool  # whether the item has inferred chunks (every document of it says so)

    def batches(self) -> Iterator[tuple[int, int]]:
        for start in range(0, self.chunks, self.batch_size):
            yield start, min(start + self.batch_size, self.chunks)

    def to_json(self) -> dict[str, Any]:
        return {"chunks": self.chunks, "batch_size": self.batch_size, "inferred": self.inferred}

    @staticmethod
    def from_json(raw: dict[str, Any]) -> WorkPlan:
        return WorkPlan(int(raw["chunks"]), int(raw["batch_size"]), bool(raw.get("inferred")))


def ingest_steps(svc: Services) -> IngestSteps:
    """The tasks over the same pipeline the local runner uses."""
    return IngestSteps(ingest_pipeline(svc), svc.container.blobs, search=lambda: svc.container.search_index)
