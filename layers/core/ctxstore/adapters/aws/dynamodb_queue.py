"""WorkQueue on a DynamoDB table: leased jobs with conditional writes.

Why DynamoDB and not SQS
------------------------
The port promises things SQS standard queues do not give on their own:

- *Unique job ids*: a repeated ``enqueue`` of a queued or running job is a no-op returning False. SQS
  standard queues do not de-duplicate, so SQS would need a DynamoDB marker per job anyway.
- *Lease tokens*: ``complete``/``retry``/``fail`` from a worker whose lease expired must not touch the
  new lease. SQS only promises that deleting with an old receipt handle "might not" delete the message.
- *Sub-second timing*: leases and retry delays are floats (the local runner and tests use 50-200 ms);
  SQS visibility timeouts and delays are whole seconds, and delays cap at 15 minutes.
- *Exact pending counts and FIFO order by due time*; SQS counts are approximate and unordered.

With SQS every one of these needs a DynamoDB item per job beside the message, so the DynamoDB item
*is* the job here and SQS is left for fan-out where its semantics fit (webhook deliveries with a DLQ
and partial-batch failures, added with that feature).

Layout (table keys ``pk`` = queue name, ``sk`` = job id)
--------------------------------------------------------
- ``gq``: the queue name while the job is live (ready or leased), ``f"{queue}#dead"`` once dead-lettered.
- ``due``: epoch seconds when the job may be claimed: its run time while ready, its lease expiry while
  leased (so an expired lease is simply due again).
- ``lt``: the current lease token; every ack is conditional on it.
- GSI ``due`` (hash ``gq``, range ``due``) lists due jobs in order and counts pending ones.

``claim`` queries the index for due jobs, then takes each with a conditional UpdateItem on the base
table (``gq = queue AND due <= now``); the index is eventually consistent, the condition is not, so two
workers never hold the same lease. A job enqueued a moment ago may be missed by one claim (index lag,
typically well under a second) and is handed out by the next. Dead jobs keep a TTL (``expires_at``) of
14 days, like an SQS DLQ's retention. All jobs of one queue share a partition: about 1,000 writes/s per
queue, ample for the control-plane jobs (provisioning, purges) this carries; shard ``gq`` if that changes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws._common import error_code
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.ports.work_queue import Job, complete_each, enqueue_each

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DUE_INDEX = "due"
DEAD_SUFFIX = "#dead"
DEAD_RETENTION_S = 14 * 24 * 3600


def _n(value: float | int) -> dict[str, str]:
    return {"N": repr(float(value)) if isinstance(value, float) else str(value)}


def _conditional_failed(exc: ClientError) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


class DynamoDbWorkQueue:
    def __init__(self, table: str, *, client: DynamoDBClient | None = None) -> None:
        if not table:
            raise ValueError("a DynamoDB table name is required (CTXSTORE_JOBS_TABLE)")
        self._table = table
        self._ddb: DynamoDBClient = map_faults(client or make_client("dynamodb"))  # throttles/5xx -> E6001

    def enqueue(self, org: str, queue: str, job_id: str, payload: dict[str, Any], *, delay_s: float = 0) -> bool:
        now = time.time()
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item={
                    "pk": {"S": queue},
                    "sk": {"S": job_id},
                    "gq": {"S": queue},
                    "due": _n(now + max(0.0, delay_s)),
                    "org": {"S": org},
                    "payload": {"S": json.dumps(payload, separators=(",", ":"))},
                    "attempts": {"N": "0"},
                    "st": {"S": "ready"},
                    "created_at": _n(now),
                },
                # A job id is unique while queued or running; a dead one may be submitted again.
                ConditionExpression="attribute_not_exists(pk) OR gq = :dead",
                ExpressionAttributeValues={":dead": {"S": queue + DEAD_SUFFIX}},
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                return False
            raise
        return True

    def enqueue_many(self, org: str, queue: str, jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        return enqueue_each(self, org, queue, jobs)

    def claim(self, queue: str, *, lease_s: float, limit: int = 1) -> list[Job]:
        if limit <= 0:
            return []
        now = time.time()
        jobs: list[Job] = []
        args: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": DUE_INDEX,
            "KeyConditionExpression": "gq = :q AND due <= :now",
            "ExpressionAttributeValues": {":q": {"S": queue}, ":now": _n(now)},
            "ProjectionExpression": "pk, sk",
        }
        while len(jobs) < limit:
            args["Limit"] = max(10, 2 * (limit - len(jobs)))  # some candidates may be taken by others
            resp = self._ddb.query(**args)
            for item in resp.get("Items", []):
                job = self._take(queue, item["sk"]["S"], now, lease_s)
                if job is not None:
                    jobs.append(job)
                    if len(jobs) >= limit:
                        break
            last = resp.get("LastEvaluatedKey")
            if not last:
                break
            args["ExclusiveStartKey"] = last
        return jobs

    def _take(self, queue: str, job_id: str, now: float, lease_s: float) -> Job | None:
        token = uuid.uuid4().hex
        try:
            resp = self._ddb.update_item(
                TableName=self._table,
                Key={"pk": {"S": queue}, "sk": {"S": job_id}},
                UpdateExpression="SET lt = :t, due = :until, st = :leased, attempts = attempts + :one",
                ConditionExpression="gq = :q AND due <= :now",
                ExpressionAttributeValues={
                    ":t": {"S": token},
                    ":until": _n(now + max(0.0, lease_s)),
                    ":leased": {"S": "leased"},
                    ":one": {"N": "1"},
                    ":q": {"S": queue},
                    ":now": _n(now),
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                return None  # another worker took it, or it was completed meanwhile
            raise
        item = resp["Attributes"]
        return Job(
            queue=queue,
            job_id=job_id,
            org=item["org"]["S"],
            payload=json.loads(item["payload"]["S"]),
            attempts=int(item["attempts"]["N"]),
            lease_token=token,
        )

    def _ack(self, job: Job, update: str, values: dict[str, Any]) -> None:
        """An update that holds only while ``job`` still owns the lease; a stale worker's ack is dropped."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key={"pk": {"S": job.queue}, "sk": {"S": job.job_id}},
                UpdateExpression=update,
                ConditionExpression="lt = :t",
                ExpressionAttributeValues={":t": {"S": job.lease_token}, **values},
            )
        except ClientError as exc:
            if not _conditional_failed(exc):
                raise

    def complete(self, job: Job) -> None:
        try:
            self._ddb.delete_item(
                TableName=self._table,
                Key={"pk": {"S": job.queue}, "sk": {"S": job.job_id}},
                ConditionExpression="lt = :t",
                ExpressionAttributeValues={":t": {"S": job.lease_token}},
            )
        except ClientError as exc:
            if not _conditional_failed(exc):
                raise

    def complete_many(self, jobs: Sequence[Job]) -> None:
        complete_each(self, jobs)

    def retry(self, job: Job, *, delay_s: float, error: str) -> None:
        self._ack(
            job,
            "SET due = :due, st = :ready, err = :err REMOVE lt",
            {":due": _n(time.time() + max(0.0, delay_s)), ":ready": {"S": "ready"}, ":err": {"S": error[:2000]}},
        )

    def fail(self, job: Job, *, error: str) -> None:
        now = time.time()
        self._ack(
            job,
            "SET gq = :dead, due = :now, st = :st, err = :err, expires_at = :exp REMOVE lt",
            {
                ":dead": {"S": job.queue + DEAD_SUFFIX},
                ":now": _n(now),
                ":st": {"S": "dead"},
                ":err": {"S": error[:2000]},
                ":exp": {"N": str(int(now + DEAD_RETENTION_S))},
            },
        )

    def _index_items(self, gq: str, *, count: bool) -> tuple[int, list[dict[str, Any]]]:
        args: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": DUE_INDEX,
            "KeyConditionExpression": "gq = :q",
            "ExpressionAttributeValues": {":q": {"S": gq}},
        }
        if count:
            args["Select"] = "COUNT"
        total = 0
        items: list[dict[str, Any]] = []
        while True:
            resp = self._ddb.query(**args)
            total += int(resp.get("Count", 0))
            items.extend(resp.get("Items", []))
            last = resp.get("LastEvaluatedKey")
            if not last:
                return total, items
            args["ExclusiveStartKey"] = last

    def pending(self, queue: str) -> int:
        """Jobs ready or leased (read from the index, so it may lag a write by a moment)."""
        return self._index_items(queue, count=True)[0]

    def dead(self, queue: str) -> list[tuple[str, str]]:
        """Dead-lettered (job id, last error) pairs, kept for 14 days."""
        _, items = self._index_items(queue + DEAD_SUFFIX, count=False)
        return [(i["sk"]["S"], i.get("err", {}).get("S", "")) for i in items]
