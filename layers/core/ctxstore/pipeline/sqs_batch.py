"""One SQS batch through the runner, with partial-batch failure reporting (``ReportBatchItemFailures``).

Each record is one job (``{org, queue, job_id, payload}``, as the SQS-routed work queue sends it).
A job to run again is reported in ``batchItemFailures`` (the queue has already set its visibility to
the backoff delay), so Lambda deletes the rest of the batch and only that message comes back. A
record that cannot be read, or whose handling broke outside the job (storage down), is reported too:
it comes back after the queue's visibility timeout, and the queue's redrive policy dead-letters it if
that keeps happening.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ctxstore.pipeline.local_runner import LocalRunner, QueueSpec
from ctxstore.ports.work_queue import Job

log = logging.getLogger("ctxstore.sqs_batch")


def job_of(record: dict[str, Any]) -> Job:
    body = json.loads(record["body"])
    return Job(
        queue=str(body["queue"]),
        job_id=str(body["job_id"]),
        org=str(body["org"]),
        payload=dict(body["payload"]),
        attempts=int(record.get("attributes", {}).get("ApproximateReceiveCount", 1)),
        lease_token=str(record["receiptHandle"]),
    )


def run_batch(runner: LocalRunner, specs: dict[str, QueueSpec], event: dict[str, Any]) -> dict[str, Any]:
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        message_id = str(record.get("messageId", ""))
        try:
            job = job_of(record)
            spec = specs[job.queue]
            if runner.run_job(spec, job) == "retry":
                failures.append({"itemIdentifier": message_id})
        except Exception:
            log.exception("SQS record %s could not be handled", message_id)
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}
