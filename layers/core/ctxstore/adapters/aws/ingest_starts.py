"""Bounded ingestion starts: at most ``max_running`` ingestion executions run at once, however many items arrive.

Why: one Step Functions execution per item with nothing in between lets a 100k-item backfill (an upload
burst, a connector's first sync) run thousands of executions at once, each invoking up to 4 Lambda tasks,
all drawing on the account's shared concurrency with the API functions. Reserved concurrency cannot fence
it off: a new account's quota may be 10 and Lambda keeps 100 units unreserved, so deployment fails.

How:
- The API, console and connector functions do not start executions; ``SqsWorkflowStarter`` sends each
  start to the ingest start queue (SQS holds any backlog durably).
- ``functions/ingest_starter`` takes batches from that queue through an event source mapping whose
  ``ScalingConfig.MaximumConcurrency`` is 2: AWS documents that the mapping then stops reading messages
  while both invocations are busy, so a backlog stays in the queue instead of being received and
  returned (services-sqs-scaling; "Introducing maximum concurrency", AWS Compute Blog).
- ``BoundedStarts`` starts an execution only with a free slot. The slots are one record (kind
  ``ingest_slots``) listing the executions started, written with a version condition, so two starters
  never hand out one slot. A slot is free again once DescribeExecution says its execution is no longer
  RUNNING (succeeded, failed, timed out or aborted alike: nothing has to remember to release it). A full
  registry makes the starter wait, polling, while its invocation lasts; messages it could not start are
  made visible again at once and reported in ``batchItemFailures`` for the next invocation.
A counter decremented by the executions themselves was rejected: an aborted or timed-out execution never
decrements it, and the slots would leak.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter, execution_name
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.records import ConditionFailed, Put, RecordStore

SQS_BATCH_ENTRIES = 10  # SendMessageBatch's most entries
SQS_BATCH_BYTES = 262_144  # SendMessageBatch's most bytes, the bodies summed
SLOTS_ORG = "_system"  # services.record_kinds.SYSTEM_ORG
SLOTS_KIND = "ingest_slots"
SLOTS_KEY = "running"
FRESH_S = 120.0  # a slot whose execution does not exist yet is held this long (being started, or lag)


class SqsWorkflowStarter:
    """WorkflowStarter that queues a start for functions/ingest_starter (the bounded path).

    Always True: a repeated name is found out when the starter starts it (ExecutionAlreadyExists) and
    dropped there; callers do not act on the answer.
    """

    def __init__(self, queue_url: str, *, client: Any | None = None) -> None:
        if not queue_url:
            raise ValueError("an SQS queue URL is required (CTXSTORE_INGEST_START_QUEUE_URL)")
        self._url = queue_url
        self._sqs = map_faults(client or make_client("sqs"))

    def start(self, org: str, execution_name_: str, payload: dict[str, Any]) -> bool:
        self._sqs.send_message(QueueUrl=self._url, MessageBody=_start_body(org, execution_name_, payload))
        return True

    def start_many(self, org: str, starts: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        """SendMessageBatch: ten messages a call, their bodies together within SQS's 256 KiB; an entry the
        batch reports failed is sent again on its own (SendMessage raises what it meets)."""
        bodies = [_start_body(org, name, payload) for name, payload in starts]
        for group in _batches(bodies):
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(group)]
            answer = self._sqs.send_message_batch(QueueUrl=self._url, Entries=entries)
            for failed in answer.get("Failed", []):
                self._sqs.send_message(QueueUrl=self._url, MessageBody=group[int(failed["Id"])])
        return [True] * len(bodies)


def _start_body(org: str, execution_name_: str, payload: dict[str, Any]) -> str:
    return json.dumps({"org": org, "execution_name": execution_name_, "payload": payload}, separators=(",", ":"))


def _batches(bodies: Sequence[str]) -> list[list[str]]:
    groups: list[list[str]] = []
    size = 0
    for body in bodies:
        n = len(body.encode())
        if not groups or len(groups[-1]) == SQS_BATCH_ENTRIES or size + n > SQS_BATCH_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(body)
        size += n
    return groups


class ExecutionSlots:
    """At most ``limit`` execution names held, in one versioned record; stopped executions give theirs back."""

    def __init__(
        self,
        records: RecordStore,
        status: Callable[[str], str | None],
        limit: int,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if limit < 1:
            raise ValueError("at least one ingestion execution must be allowed to run")
        self._records, self._status, self._limit, self._clock = records, status, limit, clock

    def held(self) -> dict[str, float]:
        rec = self._records.get(SLOTS_ORG, SLOTS_KIND, "", SLOTS_KEY)
        return dict(rec.data.get("held", {})) if rec else {}

    def take(self, name: str) -> bool:
        """Hold a slot for ``name``; False when every slot is held by a running execution."""
        for _ in range(10):  # lost races with the other starter: read again
            rec = self._records.get(SLOTS_ORG, SLOTS_KIND, "", SLOTS_KEY)
            held: dict[str, float] = dict(rec.data.get("held", {})) if rec else {}
            if name in held:
                return True
            now = self._clock()
            if len(held) >= self._limit:
                held = {n: t for n, t in held.items() if self._holds(n, now - t)}
                if len(held) >= self._limit:
                    if rec is not None and len(held) < len(rec.data.get("held", {})):
                        self._write(rec.version, held)  # keep the pruning; a lost race here costs nothing
                    return False
            held[name] = now
            if self._write(rec.version if rec else None, held):
                return True
        raise StoreUnavailable("the ingestion slots kept changing; retry shortly")

    def _holds(self, name: str, age_s: float) -> bool:
        status = self._status(name)
        return status == "RUNNING" or (status is None and age_s < FRESH_S)

    def give_back(self, name: str) -> None:
        """Free the slot of an execution that did not start (a repeat, or the start failed)."""
        for _ in range(10):
            rec = self._records.get(SLOTS_ORG, SLOTS_KIND, "", SLOTS_KEY)
            if rec is None or name not in rec.data.get("held", {}):
                return
            held = {n: t for n, t in rec.data["held"].items() if n != name}
            if self._write(rec.version, held):
                return

    def _write(self, version: int | None, held: dict[str, float]) -> bool:
        put = Put(SLOTS_KIND, "", SLOTS_KEY, {"held": held}, if_absent=version is None, if_version=version)
        try:
            self._records.put(SLOTS_ORG, put)
        except ConditionFailed:
            return False
        return True


@dataclass
class BoundedStarts:
    """Runs one SQS batch of queued starts (functions/ingest_starter) within the slots."""

    sfn: SfnWorkflowStarter
    slots: ExecutionSlots
    sqs: Any  # the SQS client: unstarted messages are made visible again at once
    queue_url: str
    poll_s: float = 5.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def run(self, records: list[dict[str, Any]], remaining_s: float) -> dict[str, Any]:
        """Start what the slots allow within ``remaining_s`` (less a margin); report the rest for later."""
        deadline = self.clock() + max(0.0, remaining_s - max(2 * self.poll_s, 10.0))
        failures: list[str] = []
        for i, message in enumerate(records):
            body = json.loads(message["body"])
            org, name, payload = str(body["org"]), str(body["execution_name"]), dict(body["payload"])
            slot = execution_name(org, name)
            try:
                while not self.slots.take(slot):
                    if self.clock() + self.poll_s > deadline:  # no slot in this invocation: the rest waits
                        rest = records[i:]
                        self._release(rest)
                        return _failures(failures + [m["messageId"] for m in rest])
                    self.sleep(self.poll_s)
                if not self.sfn.start(org, name, payload):
                    self.slots.give_back(slot)  # this item version already ran: nothing to hold
            except StoreUnavailable:  # throttled or down even after retries: this message comes back later
                failures.append(message["messageId"])
                try:
                    self.slots.give_back(slot)
                except StoreUnavailable:
                    pass  # an unstarted slot is pruned after FRESH_S anyway
        return _failures(failures)

    def _release(self, messages: list[dict[str, Any]]) -> None:
        """Make the messages this invocation could not start visible again now, not after the visibility timeout."""
        for m in messages:
            try:
                self.sqs.change_message_visibility(
                    QueueUrl=self.queue_url, ReceiptHandle=m["receiptHandle"], VisibilityTimeout=0
                )
            except StoreUnavailable:
                pass  # it comes back after the queue's visibility timeout instead


def _failures(message_ids: list[str]) -> dict[str, Any]:
    return {"batchItemFailures": [{"itemIdentifier": m} for m in message_ids]}
