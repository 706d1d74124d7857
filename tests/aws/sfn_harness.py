"""Run statemachines/ingest.asl.json on moto's executing Step Functions, its Lambda tasks in this process.

moto executes a state machine for real (Map, Choice, Retry/Catch, the context object) but can only
invoke a Lambda function through Docker. The harness routes each Lambda invoke to the handler of the
function the template deploys under that name, imported as Lambda would import it, and answers the
way the Lambda Python runtime does: the handler's return value as the payload, or for an exception
``{"errorType": <class name>, "errorMessage": ...}`` with ``X-Amz-Function-Error: Unhandled``. Retry
waits are recorded instead of slept.
"""

from __future__ import annotations

import copy
import json
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from tests.aws.moto_env import REGION, ROOT, resource

ASL = ROOT / "statemachines" / "ingest.asl.json"
ACCOUNT = "123456789012"


def function_arn(logical_id: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical_id}"


def substitutions() -> dict[str, str]:
    """The template's DefinitionSubstitutions with each Fn::GetAtt <Function>.Arn resolved to a moto ARN."""
    subs = resource("IngestStateMachine")["Properties"]["DefinitionSubstitutions"]
    out: dict[str, str] = {}
    for name, value in subs.items():
        if isinstance(value, dict) and "GetAtt" in value:
            target = value["GetAtt"]
            logical_id = target.split(".")[0] if isinstance(target, str) else target[0]
            out[name] = function_arn(logical_id)
    return out


def definition() -> str:
    text = ASL.read_text()
    for name, value in substitutions().items():
        text = text.replace("${" + name + "}", value)
    return text


class LambdaRouter:
    """Replaces moto's Docker-backed Lambda invoke with in-process calls to the real handlers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, handlers: dict[str, Callable[..., Any]]) -> None:
        from moto.awslambda.models import LambdaBackend
        from moto.stepfunctions.parser import models as sfn_models
        from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

        self.handlers = handlers
        self.calls: list[tuple[str, dict[str, Any], str]] = []  # (function, event, outcome)
        self.waits: list[float] = []
        monkeypatch.setattr(LambdaBackend, "invoke", self._invoke)
        monkeypatch.setattr(retrier_decl.time, "sleep", self.waits.append)
        monkeypatch.setattr(sfn_models, "copy", _SnapshotCopy)

    def _invoke(
        self, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        """Set on LambdaBackend as a bound method, so the backend instance is not passed."""
        from tests.aws.test_handlers import FakeContext

        name = function_name.rsplit(":", 1)[-1]
        event = json.loads(body) if body else {}
        try:
            result = self.handlers[name](event, FakeContext(function_name=name))
        except Exception as exc:  # what the Lambda Python runtime reports for an unhandled exception
            self.calls.append((name, event, type(exc).__name__))
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = {
                "errorType": type(exc).__name__,
                "errorMessage": str(exc),
                "stackTrace": traceback.format_tb(exc.__traceback__),
            }
            return json.dumps(payload).encode()
        self.calls.append((name, event, "ok"))
        return json.dumps(result).encode()


class _SnapshotCopy:
    """moto's start_execution deep-copies the state machine as the new execution's snapshot, together with
    the executions already running on it; whether one of those holds a lock at that moment (a task in
    flight) is timing, and a lock cannot be copied, so the second start of one request failed now and then.
    The snapshot only needs the definition: copy it without the running executions."""

    @staticmethod
    def deepcopy(obj: Any, memo: dict[int, Any] | None = None) -> Any:
        from moto.stepfunctions.models import StateMachineInstance

        if not isinstance(obj, StateMachineInstance):
            return copy.deepcopy(obj, memo)
        running, obj.executions = obj.executions, []
        try:
            return copy.deepcopy(obj, memo)
        finally:
            obj.executions = running


def create_state_machine() -> str:
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="ingest-sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn: str = sfn.create_state_machine(name="ingest", definition=definition(), roleArn=role)["stateMachineArn"]
    return arn


def wait_for_executions(arn: str, count: int, timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Every execution of the machine once `count` of them have stopped running."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    deadline = time.monotonic() + timeout_s
    while True:
        execs = sfn.list_executions(stateMachineArn=arn)["executions"]
        done = [e for e in execs if e["status"] != "RUNNING"]
        if len(done) >= count:
            return [sfn.describe_execution(executionArn=e["executionArn"]) for e in execs]
        if time.monotonic() > deadline:
            raise AssertionError(f"executions still running: {execs}")
        time.sleep(0.05)


def history(execution_arn: str) -> list[dict[str, Any]]:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    events: list[dict[str, Any]] = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return events


def handlers_of(modules: dict[str, ModuleType]) -> dict[str, Callable[..., Any]]:
    return {logical_id: m.handler for logical_id, m in modules.items()}


def code_dir(logical_id: str) -> str:
    return Path(resource(logical_id)["Properties"]["CodeUri"]).name
