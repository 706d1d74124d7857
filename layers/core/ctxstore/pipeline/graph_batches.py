"""Graph jobs that one local worker claimed together (the runner's batch handler for the graph queue).

The items' chunks go to the extractor in parts of PART_ITEMS items (one call a part, spaCy batching its texts),
outside any lock: extraction reads only the chunks indexed for that version. Then, under a part's locks, its graph
is written with a few round trips per scope and its statuses move to completed in one write, while the next part
is being extracted. A replaced, deleted or finished item is skipped. A job not
acknowledged (a crash mid-batch) runs again, and rewrites the same graph: every graph write is keyed by
ids. A batch that fails is run job by job, so only the bad item fails.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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
# A batch is extracted in parts, two in flight: while one part's graph is written, the extraction processes work
# on the next, so they wait neither for the graph writes nor for each other's last slice at the end of a part.
PART_ITEMS = 64
PARTS_IN_FLIGHT = 2
_Todo = tuple[ItemRef, str, list[Chunk]]  # an item, the version its job is for, the chunks indexed for it


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
        parts = [items[i : i + PART_ITEMS] for i in range(0, len(items), PART_ITEMS)]
        with step("graph"):
            if len(parts) == 1:  # the short batches claimed while indexing: nothing to overlap, no thread
                self._write(org, *self._prepare(org, items))
                return
            ahead = ThreadPoolExecutor(PARTS_IN_FLIGHT, thread_name_prefix="graph-prepare")
            try:
                pending = deque(ahead.submit(self._prepare, org, part) for part in parts[:PARTS_IN_FLIGHT])
                for k in range(len(parts)):
                    todo, prepared = pending.popleft().result()
                    if k + PARTS_IN_FLIGHT < len(parts):
                        pending.append(ahead.submit(self._prepare, org, parts[k + PARTS_IN_FLIGHT]))
                    self._write(org, todo, prepared)
            finally:
                ahead.shutdown(wait=True, cancel_futures=True)

    def _prepare(self, org: str, part: Sequence[tuple[ItemRef, str]]) -> tuple[list[_Todo], list[GraphRows]]:
        """A part's items still to do, with their indexed chunks, and their graph rows. Read part by part, so the
        extraction processes get a batch's first part without waiting for every item of the batch to be read."""
        todo: list[_Todo] = []
        for ref, version in part:
            record = self._p.current(org, ref, version)
            if record is not None and record["status"] not in TERMINAL:
                todo.append((ref, version, self._p.indexed_chunks(org, ref)))
        if not todo:
            return todo, []
        return todo, self._graphs.prepare_many(org, [(ref, chunks) for ref, _, chunks in todo])

    def _write(self, org: str, part: Sequence[_Todo], prepared: list[GraphRows]) -> None:
        """Under the items' locks: the graph of those still at this version, and their status completed."""
        if not part:
            return
        with self._items.lock_many(org, [ref for ref, _, _ in part], wait_s=STEP_WAIT_SECONDS):
            live = [
                (ref, version, record, rows)
                for (ref, version, _), rows in zip(part, prepared, strict=True)
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
