"""Run statemachines/ingest.asl.json on moto's executing Step Functions, its Lambda tasks in this process.

moto executes a state machine for real (Map, Choice, Retry/Catch, the context object) but can only
invoke a Lambda function through Docker. The harness routes each Lambda invoke to the handler of the
function the template deploys under that name, imported as Lambda would import it, and answers the
way the Lambda Python runtime does: the handler's return value as the payload, or for an exception
``{"errorType": <class name>, "errorMessage": ...}`` with ``X-Amz-Function-Error: Unhandled``. Retry
waits are recorded instead of slept.

moto runs each task on a daemon thread that waits, with no time limit, for the task's thread to report;
a task thread that dies without reporting leaves the execution RUNNING for good, silently. So nothing
a handler raises may escape the invoke, and a run that does not finish reports what was in flight.
"""

from __future__ import annotations

import copy
import json
import sys
import threading
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
        self.in_flight: dict[str, tuple[str, float]] = {}  # thread name -> (function, start)
        monkeypatch.setattr(LambdaBackend, "invoke", self._invoke)
        # Only the retrier's module sees a recording clock: `retrier_decl.time.sleep` is the process-wide
        # time.sleep, and replacing it turned every other sleep (the test's polling, backoff loops in
        # other threads) into a busy loop and padded `waits` with polls.
        monkeypatch.setattr(retrier_decl, "time", _RecordingClock(self.waits))
        monkeypatch.setattr(sfn_models, "copy", _SnapshotCopy)

    def _invoke(
        self, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        """Set on LambdaBackend as a bound method, so the backend instance is not passed."""
        from tests.aws.test_handlers import FakeContext

        name = function_name.rsplit(":", 1)[-1]
        event = json.loads(body) if body else {}
        thread = threading.current_thread().name
        self.in_flight[thread] = (name, time.monotonic())
        try:
            result = self.handlers[name](event, FakeContext(function_name=name))
            payload = json.dumps(result).encode()
        # BaseException too: moto's task thread catches only Exception, and a SystemExit (say) would end
        # it without a word. Lambda reports a handler that exits as a function error; so does this.
        except BaseException as exc:
            self.calls.append((name, event, type(exc).__name__))
            response_headers["x-amz-function-error"] = "Unhandled"
            error = {
                "errorType": type(exc).__name__,
                "errorMessage": str(exc),
                "stackTrace": traceback.format_tb(exc.__traceback__),
            }
            return json.dumps(error).encode()
        finally:
            self.in_flight.pop(thread, None)
        self.calls.append((name, event, "ok"))
        return payload

    def report(self) -> str:
        """The invocations still running and every thread's stack: what a run that never ends was doing."""
        now = time.monotonic()
        lines = [f"in flight: {name} on {thread} for {now - t0:.1f} s" for thread, (name, t0) in self.in_flight.items()]
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            lines.append(f"--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame)))
        return "\n".join(lines)


class _RecordingClock:
    """The `time` module as moto's retrier sees it: sleep records the wait instead of sleeping."""

    def __init__(self, waits: list[float]) -> None:
        self._waits = waits

    def sleep(self, seconds: float) -> None:
        self._waits.append(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


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


def wait_for_executions(
    arn: str, count: int, timeout_s: float = 120.0, router: LambdaRouter | None = None
) -> list[dict[str, Any]]:
    """Every execution of the machine once `count` of them have stopped running."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    deadline = time.monotonic() + timeout_s
    while True:
        execs = sfn.list_executions(stateMachineArn=arn)["executions"]
        done = [e for e in execs if e["status"] != "RUNNING"]
        if len(done) >= count:
            return [sfn.describe_execution(executionArn=e["executionArn"]) for e in execs]
        if time.monotonic() > deadline:
            last = {e["name"]: history(e["executionArn"])[-3:] for e in execs if e["status"] == "RUNNING"}
            raise AssertionError(
                f"executions still running after {timeout_s:.0f} s: {execs}\nlast events: {last}\n"
                + (router.report() if router else "")
            )
        time.sleep(0.05)


def history(execution_arn: str) -> list[dict[str, Any]]:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    events: list[dict[str, Any]] = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return events


def handlers_of(modules: dict[str, ModuleType]) -> dict[str, Callable[..., Any]]:
    return {logical_id: m.handler for logical_id, m in modules.items()}


def code_dir(logical_id: str) -> str:
    return Path(resource(logical_id)["Properties"]["CodeUri"]).name
