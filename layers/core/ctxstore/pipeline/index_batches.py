"""Index jobs that one local worker claimed together (the runner's batch handler for the index queue).

The batch's items are marked processing in one status write (IngestPipeline.begin_many); each is then
parsed and chunked on its own, exactly as a single job; whenever FLUSH_CHUNKS chunks wait, the waiting
items are embedded together (IngestPipeline.embed_many: one index read, one embedder call) and published
together (IngestPipeline.publish_many: one lock write, one index write, one status write), so a large
document is not held back by the rest of its batch. An item replaced or deleted meanwhile gets nothing
written; a group the embedder or the index rejects is redone item by item, so only the bad item fails.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ctxstore.domain.chunking import Chunk
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.domain.items import ItemRecord, ItemRef
from ctxstore.pipeline.ingest_pipeline import IngestPipeline, StaleJob
from ctxstore.pipeline.retry_policy import TransientError
from ctxstore.ports.search_index import ChunkDoc
from ctxstore.ports.work_queue import Job

log = logging.getLogger("ctxstore.ingest")

FLUSH_CHUNKS = 32

JobError = BaseException | None  # per job: None when done (or stale), else what the runner settles it with


@dataclass(frozen=True)
class _Chunked:
    """An index job's item, chunked and waiting to be embedded."""

    org: str
    ref: ItemRef
    version: str
    record: ItemRecord
    chunks: list[Chunk]


@dataclass(frozen=True)
class _Embedded:
    """An index job's item, embedded and waiting to be published."""

    org: str
    ref: ItemRef
    version: str
    chunks: list[Chunk]
    docs: list[ChunkDoc]


class IndexBatches:
    def __init__(self, pipeline: IngestPipeline) -> None:
        self._p = pipeline

    def handle(self, jobs: Sequence[Job]) -> list[JobError]:
        errors: list[JobError] = [None] * len(jobs)
        waiting: list[tuple[int, _Chunked]] = []

        def flush() -> None:
            embedded: list[tuple[int, _Embedded]] = []
            for i, outcome in self._embed(waiting):
                if isinstance(outcome, _Embedded):
                    embedded.append((i, outcome))
                else:
                    errors[i] = outcome
            for i, error in self._publish(embedded):
                errors[i] = error
            waiting.clear()

        begun = self._begin(jobs)
        for i, job in enumerate(jobs):
            try:
                chunked = self._chunk(job, begun[i])
            except Exception as exc:
                errors[i] = job_error(exc)
                continue
            if chunked is not None:
                waiting.append((i, chunked))
            if sum(len(c.chunks) for _, c in waiting) >= FLUSH_CHUNKS:
                flush()
        flush()
        return errors

    def _begin(self, jobs: Sequence[Job]) -> list[ItemRecord | Exception | None]:
        """Every job's begin step, one status write per org (IngestPipeline.begin_many)."""
        out: list[ItemRecord | Exception | None] = [None] * len(jobs)
        for org, members in _by_org(list(enumerate(jobs))).items():
            try:
                begun = self._p.begin_many(org, [_begin_args(job) for _, job in members])
            except Exception as exc:  # the status write itself failed: each job settles with it
                begun = [exc] * len(members)
            for (i, _), outcome in zip(members, begun, strict=True):
                out[i] = outcome
        return out

    def _chunk(self, job: Job, begun: ItemRecord | Exception | None) -> _Chunked | None:
        if isinstance(begun, Exception):
            raise begun
        if begun is None:
            return None
        ref = ItemRef.from_json(job.payload["ref"])
        version = str(job.payload["version"])
        chunks = self._p.parse_and_chunk(job.org, ref, version, begun)
        return None if chunks is None else _Chunked(job.org, ref, version, begun, chunks)

    def _embed(self, waiting: Sequence[tuple[int, _Chunked]]) -> list[tuple[int, _Embedded | JobError]]:
        """The waiting items embedded together per org; when that fails, each on its own (only the bad one fails)."""
        out: list[tuple[int, _Embedded | JobError]] = []
        for org, entries in _by_org(waiting).items():
            try:
                docs = self._p.embed_many(org, [(c.ref, c.record, c.chunks) for _, c in entries])
            except Exception:
                if len(entries) > 1:
                    log.warning("batch embed failed; embedding its %d items one by one", len(entries), exc_info=True)
                out += [(i, self._embed_one(c)) for i, c in entries]
                continue
            for (i, c), d in zip(entries, docs, strict=True):
                out.append((i, _Embedded(c.org, c.ref, c.version, c.chunks, d)))
        return out

    def _embed_one(self, c: _Chunked) -> _Embedded | JobError:
        try:
            return _Embedded(c.org, c.ref, c.version, c.chunks, self._p.embed(c.org, c.ref, c.record, c.chunks))
        except Exception as exc:
            return job_error(exc)

    def _publish(self, waiting: Sequence[tuple[int, _Embedded]]) -> list[tuple[int, JobError]]:
        """Publish the embedded items (one write set per org), then hand each to its graph step."""
        out: list[tuple[int, JobError]] = []
        for org, entries in _by_org(waiting).items():
            published: list[bool | BaseException]
            try:
                published = list(self._p.publish_many(org, [(e.ref, e.version, e.docs) for _, e in entries]))
            except StoreUnavailable as exc:
                out += [(i, TransientError(str(exc))) for i, _ in entries]
                continue
            except Exception:  # e.g. one item's vectors rejected: publish one by one so only it fails
                log.warning("batch publish failed; publishing its %d items one by one", len(entries), exc_info=True)
                published = [self._publish_one(e) for _, e in entries]
            live = [(i, e) for (i, e), result in zip(entries, published, strict=True) if result is True]
            for (i, _), result in zip(entries, published, strict=True):
                if result is not True:  # False: replaced or deleted meanwhile, nothing to do
                    out.append((i, result if isinstance(result, BaseException) else None))
            out += zip([i for i, _ in live], self._hand_to_graph(org, [e for _, e in live]), strict=True)
        return out

    def _publish_one(self, e: _Embedded) -> bool | BaseException:
        try:
            self._p.publish(e.org, e.ref, e.version, e.docs)
        except Exception as exc:
            outcome = job_error(exc)
            return False if outcome is None else outcome
        return True

    def _hand_to_graph(self, org: str, published: Sequence[_Embedded]) -> list[JobError]:
        """The published items' graph jobs started in one write (or, with no graph queue, each graph step run
        here, failing only its own job)."""
        if not published:
            return []
        if not self._p.queues_graph:
            return [self._hand_one_to_graph(e) for e in published]
        try:
            self._p.queue_graphs(org, [(e.ref, e.version) for e in published])
        except Exception as exc:
            return [job_error(exc)] * len(published)
        return [None] * len(published)

    def _hand_one_to_graph(self, e: _Embedded) -> JobError:
        try:
            self._p.hand_to_graph(e.org, e.ref, e.version, e.chunks)
        except Exception as exc:
            return job_error(exc)
        return None


class _OfOrg(Protocol):
    @property
    def org(self) -> str: ...


_T = TypeVar("_T", bound=_OfOrg)


def _by_org(entries: Sequence[tuple[int, _T]]) -> dict[str, list[tuple[int, _T]]]:
    """(index, job or item) pairs grouped by their org, in order: each org's writes are its own."""
    groups: dict[str, list[tuple[int, _T]]] = {}
    for entry in entries:
        groups.setdefault(entry[1].org, []).append(entry)
    return groups


def _begin_args(job: Job) -> tuple[ItemRef, str, int]:
    return ItemRef.from_json(job.payload["ref"]), str(job.payload["version"]), job.attempts


def job_error(exc: BaseException) -> JobError:
    """How the runner settles a batched job that raised: a stale one is done (None), storage trouble is
    retried, anything else fails the job as it would a single one."""
    if isinstance(exc, StaleJob):
        return None
    if isinstance(exc, StoreUnavailable):
        return TransientError(str(exc))
    return exc
