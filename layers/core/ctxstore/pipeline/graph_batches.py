"""Graph jobs that one local worker claimed together (the runner's batch handler for the graph queue).

The items' chunks go to the extractor in one call (spaCy's `pipe` over the whole batch, one hop to the
extraction process), outside any lock: extraction reads only the chunks indexed for that version. Then,
under the items' locks, the graph is written with a few round trips per scope for them all and the
statuses move to completed in one write. A replaced, deleted or finished item is skipped. A job not
acknowledged (a crash mid-batch) runs again, and rewrites the same graph: every graph write is keyed by
ids. A batch that fails is run job by job, so only the bad item fails.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from ctxstore.domain.chunking import Chunk
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.domain.items import COMPLETED, TERMINAL, ItemRecord, ItemRef
from ctxstore.pipeline.index_batches import JobError, job_error
from ctxstore.pipeline.ingest_pipeline import IngestPipeline, step
from ctxstore.pipeline.retry_policy import TransientError
from ctxstore.ports.work_queue import Job
from ctxstore.services.graphs.graph_rows import GraphRows
from ctxstore.services.items.locks import STEP_WAIT_SECONDS
from ctxstore.services.items.service import ItemService, StatusChange, StatusExtra

log = logging.getLogger("ctxstore.ingest")


class GraphSteps(Protocol):
    """The graph step of several items at once (services/graphs/service.py GraphService)."""

    def prepare_many(self, org: str, items: Sequence[tuple[ItemRef, list[Chunk]]]) -> list[GraphRows]: ...

    def write_many(self, org: str, items: Sequence[tuple[ItemRef, ItemRecord, GraphRows]]) -> list[int]: ...


class GraphBatches:
    def __init__(self, pipeline: IngestPipeline, items: ItemService, graphs: GraphSteps) -> None:
        self._p = pipeline
        self._items = items
        self._graphs = graphs

    def handle(self, jobs: Sequence[Job]) -> list[JobError]:
        errors: list[JobError] = [None] * len(jobs)
        by_org: dict[str, list[int]] = {}
        for i, job in enumerate(jobs):
            by_org.setdefault(job.org, []).append(i)
        for org, members in by_org.items():
            try:
                self.run(org, [_item(jobs[i]) for i in members])
            except StoreUnavailable as exc:
                for i in members:
                    errors[i] = TransientError(str(exc))
            except Exception:  # e.g. one item's text breaks the extractor: job by job, so only it fails
                log.warning("graph batch failed; running its %d jobs one by one", len(members), exc_info=True)
                for i in members:
                    errors[i] = self._one(jobs[i])
        return errors

    def run(self, org: str, items: Sequence[tuple[ItemRef, str]]) -> None:
        """The graph step of these (item, version) of one org, then completed."""
        todo: list[tuple[ItemRef, str, list[Chunk]]] = []
        for ref, version in items:
            record = self._p.current(org, ref, version)
            if record is not None and record["status"] not in TERMINAL:
                todo.append((ref, version, self._p.indexed_chunks(org, ref)))
        if not todo:
            return
        with step("graph"):
            prepared = self._graphs.prepare_many(org, [(ref, chunks) for ref, _, chunks in todo])
            with self._items.lock_many(org, [ref for ref, _, _ in todo], wait_s=STEP_WAIT_SECONDS):
                live = [
                    (ref, version, record, rows)
                    for (ref, version, _), rows in zip(todo, prepared, strict=True)
                    if (record := self._p.current(org, ref, version)) is not None
                ]
                counts = self._graphs.write_many(org, [(ref, rec, rows) for ref, _, rec, rows in live])
                changes = [
                    StatusChange(ref, version, COMPLETED, StatusExtra(relations_created=n))
                    for (ref, version, _, _), n in zip(live, counts, strict=True)
                ]
                self._items.set_statuses(org, changes)

    def _one(self, job: Job) -> JobError:
        try:
            self._p.handle_graph(job)
        except Exception as exc:
            return job_error(exc)
        return None


def _item(job: Job) -> tuple[ItemRef, str]:
    return ItemRef.from_json(job.payload["ref"]), str(job.payload["version"])
