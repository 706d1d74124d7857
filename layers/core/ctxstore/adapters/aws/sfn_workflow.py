"""WorkflowStarter on Step Functions: one execution per (org, execution name), ever.

Execution names must be 1-80 characters of ``[A-Za-z0-9-_]`` and are unique per state machine for 90
days, across every organisation. The name is therefore derived from both the org and the caller's
execution name: a readable, sanitised prefix plus a SHA-256 suffix of the exact pair, so two different
pairs never share a name and a retried request always maps to the same one.

A second StartExecution with that name raises ExecutionAlreadyExists, answered here as "already
started" (False). Standard workflows treat a repeat with *identical input* on a running execution as an
idempotent success instead, which would make a repeat look like a fresh start; the input therefore
carries a per-call ``start_id`` so every repeat is reported as a repeat.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws._common import error_code
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.ports.workflow import start_each

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

MAX_NAME = 80
_HASH_CHARS = 20  # 80 bits of SHA-256
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def execution_name(org: str, name: str) -> str:
    """Deterministic Step Functions execution name for (org, name): ``<readable>-<hash>``, ≤ 80 chars."""
    digest = hashlib.sha256(f"{org}\x1f{name}".encode()).hexdigest()[:_HASH_CHARS]
    readable = _UNSAFE.sub("_", f"{org}-{name}").strip("_-")
    readable = readable[: MAX_NAME - _HASH_CHARS - 1].rstrip("_-")
    return f"{readable}-{digest}" if readable else digest


class SfnWorkflowStarter:
    def __init__(self, state_machine_arn: str, *, client: SFNClient | None = None) -> None:
        if not state_machine_arn:
            raise ValueError("a state machine ARN is required (CTXSTORE_STATE_MACHINE_ARN)")
        self._arn = state_machine_arn
        self._sfn: SFNClient = map_faults(client or make_client("stepfunctions"))  # throttles/5xx -> E6001

    def status(self, name: str) -> str | None:
        """The status of the execution of this (derived) name (RUNNING, SUCCEEDED, ...); None if there is none."""
        arn = self._arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
        try:
            return str(self._sfn.describe_execution(executionArn=arn)["status"])
        except ClientError as exc:
            if error_code(exc) == "ExecutionDoesNotExist":
                return None
            raise

    def start(self, org: str, execution_name_: str, payload: dict[str, Any]) -> bool:
        """Input: ``{"org", "execution_name", "start_id", "payload"}``. False if this name already ran."""
        body = {"org": org, "execution_name": execution_name_, "start_id": uuid.uuid4().hex, "payload": payload}
        try:
            self._sfn.start_execution(
                stateMachineArn=self._arn,
                name=execution_name(org, execution_name_),
                input=json.dumps(body, separators=(",", ":")),
            )
        except ClientError as exc:
            if error_code(exc) == "ExecutionAlreadyExists":
                return False
            raise
        return True

    def start_many(self, org: str, starts: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        return start_each(self, org, starts)  # StartExecution takes one execution a call
