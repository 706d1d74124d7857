"""Work queue that sends chosen queues (webhook deliveries) to SQS and leaves the rest on DynamoDB.

An SQS-triggered Lambda receives those jobs in batches (``pipeline/sqs_batch.py``); the receipt handle
is the job's lease token. Retry sets the message's visibility timeout to the backoff delay and the
batch reports it in ``batchItemFailures``, so only that message comes back, after the delay; a
completed or given-up job (recorded by the webhook service first) is simply not reported, and Lambda
deletes it with the rest of the batch. ``attempts`` is SQS's ApproximateReceiveCount.

SQS standard queues deliver at least once and cannot de-duplicate job ids: a delivery job that
arrives twice finds its delivery record settled and does nothing (``WebhookService.deliver``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.ports.work_queue import Job, WorkQueue, complete_each, enqueue_each

MAX_DELAY_S = 900  # SendMessage DelaySeconds cap
MAX_VISIBILITY_S = 43_200  # ChangeMessageVisibility cap (12 h)


class SqsRoutedWorkQueue:
    def __init__(self, inner: WorkQueue, routes: dict[str, str], *, client: Any | None = None) -> None:
        self._inner = inner
        self._routes = dict(routes)  # queue name -> SQS queue URL
        self._sqs = map_faults(client or make_client("sqs"))  # throttles/5xx -> E6001

    def enqueue(self, org: str, queue: str, job_id: str, payload: dict[str, Any], *, delay_s: float = 0) -> bool:
        url = self._routes.get(queue)
        if url is None:
            return self._inner.enqueue(org, queue, job_id, payload, delay_s=delay_s)
        body = json.dumps({"org": org, "queue": queue, "job_id": job_id, "payload": payload})
        self._sqs.send_message(
            QueueUrl=url, MessageBody=body, DelaySeconds=min(MAX_DELAY_S, max(0, math.ceil(delay_s)))
        )
        return True

    def enqueue_many(self, org: str, queue: str, jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        return enqueue_each(self, org, queue, jobs)

    def claim(self, queue: str, *, lease_s: float, limit: int = 1) -> list[Job]:
        if queue in self._routes:
            return []  # handed to the SQS-triggered function by the event source mapping, never polled here
        return self._inner.claim(queue, lease_s=lease_s, limit=limit)

    def complete(self, job: Job) -> None:
        if job.queue not in self._routes:  # SQS: Lambda deletes every message the batch does not report
            self._inner.complete(job)

    def complete_many(self, jobs: Sequence[Job]) -> None:
        complete_each(self, jobs)

    def retry(self, job: Job, *, delay_s: float, error: str) -> None:
        if job.queue in self._routes:
            self._sqs.change_message_visibility(
                QueueUrl=self._routes[job.queue],
                ReceiptHandle=job.lease_token,
                VisibilityTimeout=min(MAX_VISIBILITY_S, max(0, math.ceil(delay_s))),
            )
        else:
            self._inner.retry(job, delay_s=delay_s, error=error)

    def fail(self, job: Job, *, error: str) -> None:
        if job.queue not in self._routes:  # SQS: given up (recorded by the on_failure hook), not reported
            self._inner.fail(job, error=error)

    def pending(self, queue: str) -> int:
        url = self._routes.get(queue)
        if url is None:
            return self._inner.pending(queue)
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]  # fmt: skip
        attrs = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return sum(int(attrs.get(n, 0)) for n in names)

    def __getattr__(self, name: str) -> Any:  # adapter extras of the inner queue (e.g. dead-letter listing)
        return getattr(self._inner, name)
