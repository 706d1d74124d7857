"""Scheduler on EventBridge Scheduler: one schedule per (org, schedule id) in the stack's group.

EventBridge pushes: each schedule invokes the target (the job worker) with ``{"schedule": {...}}`` at
its rate, so ``due`` has nothing to poll and answers [] (the local scheduler table is polled instead).
Rates are whole minutes (EventBridge's ``rate()`` floor is one minute): ``every_s`` rounds up.
Names are derived from org and id (<= 64 chars of ``[0-9A-Za-z_.-]``), so an upsert replaces the
schedule it created before.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws._common import error_code
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.ports.scheduler import Schedule

_UNSAFE = re.compile(r"[^0-9A-Za-z_.-]+")


def schedule_name(org: str, schedule_id: str) -> str:
    digest = hashlib.sha256(f"{org}\x1f{schedule_id}".encode()).hexdigest()[:16]
    readable = _UNSAFE.sub("-", f"{org}-{schedule_id}")[:47].strip("-") or "s"
    return f"{readable}-{digest}"


def rate_expression(every_s: int) -> str:
    minutes = max(1, math.ceil(every_s / 60))
    return f"rate({minutes} minute{'s' if minutes > 1 else ''})"


class EventBridgeScheduler:
    def __init__(self, group: str, *, target_arn: str, role_arn: str, client: Any | None = None) -> None:
        if not (group and target_arn and role_arn):
            raise ValueError("a schedule group, target ARN and role ARN are required")
        self._group = group
        self._target = {"Arn": target_arn, "RoleArn": role_arn, "RetryPolicy": {"MaximumRetryAttempts": 2}}
        self._client = map_faults(client or make_client("scheduler"))  # throttles/5xx -> E6001

    def upsert(self, org: str, schedule_id: str, *, every_s: int, next_at: float, payload: dict[str, Any]) -> None:
        body = {"schedule": {"schedule_id": schedule_id, "org": org, "every_s": every_s, "payload": payload}}
        args: dict[str, Any] = {
            "Name": schedule_name(org, schedule_id),
            "GroupName": self._group,
            "ScheduleExpression": rate_expression(every_s),
            "StartDate": datetime.fromtimestamp(next_at, tz=UTC),
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": {**self._target, "Input": json.dumps(body)},
            "State": "ENABLED",
        }
        try:
            self._client.update_schedule(**args)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise
            self._client.create_schedule(**args)

    def cancel(self, org: str, schedule_id: str) -> bool:
        try:
            self._client.delete_schedule(Name=schedule_name(org, schedule_id), GroupName=self._group)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            raise
        return True

    def due(self, now: float, *, limit: int = 100) -> list[Schedule]:
        return []  # EventBridge invokes the target itself at each schedule's time
