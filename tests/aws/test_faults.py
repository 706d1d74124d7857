"""Throttling, 5xx and network faults of every AWS client, injected at the wire under moto.

``WireFaults`` answers the first N requests a boto3 client sends with an error response (or raises a
read timeout) from botocore's ``before-send`` hook, before moto sees them: botocore parses, retries and
backs off exactly as it would against AWS. botocore's backoff sleeps are recorded, not slept.
A fault that outlasts botocore's 5 attempts must reach the caller as StoreUnavailable (E6001: the API
answers 503 with Retry-After, a pipeline step retries); a short one is absorbed by botocore's retries.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, ReadTimeoutError

from ctxstore.adapters.aws import faults
from ctxstore.adapters.aws._common import CLIENT_CONFIG
from ctxstore.adapters.aws._common import client as make_client
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.records import ConditionFailed, Put
from tests.aws.moto_env import REGION, MotoWorld
from tests.aws.test_handlers import FakeContext, aws, body, event, load_function, new_key  # noqa: F401 (aws: fixture)

ATTEMPTS = CLIENT_CONFIG.retries["total_max_attempts"]


class _Raw:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


class WireFaults:
    """Answers the first ``n`` requests of the clients it is registered on with an error.

    ``code``/``status``: the error response (JSON or XML, per the service's protocol). ``timeout``: raise
    botocore's ReadTimeoutError instead, as urllib3 does when AWS does not answer in time.
    ``operations``: only these operations are faulted (all when empty); ``when``: only requests for which it
    answers True (say, those sent from the Step Functions task threads).
    """

    def __init__(
        self,
        n: int,
        *,
        code: str = "ThrottlingException",
        status: int = 400,
        timeout: bool = False,
        operations: tuple[str, ...] = (),
        extra: dict[str, Any] | None = None,
        when: Callable[[], bool] = lambda: True,
    ) -> None:
        self.left, self.code, self.status, self.timeout = n, code, status, timeout
        self.operations, self.extra, self.when = operations, extra or {}, when
        self._lock = threading.Lock()
        self.faulted: list[str] = []
        self.passed: list[str] = []

    def on(self, client: Any) -> Any:
        client.meta.events.register_first("before-send", self)
        return client

    def __call__(self, request: Any, event_name: str, **_: Any) -> Any:
        operation = event_name.rsplit(".", 1)[-1]
        with self._lock:  # Step Functions runs tasks on several threads
            if self.left <= 0 or (self.operations and operation not in self.operations) or not self.when():
                self.passed.append(operation)
                return None  # on to moto
            self.left -= 1
            self.faulted.append(operation)
            _FAULTED.add(request)
        if self.timeout:
            raise ReadTimeoutError(endpoint_url=request.url)
        protocol = request.context.get("protocol") or _protocol(event_name)
        if protocol in ("rest-xml", "query", "ec2"):
            data = f"<Error><Code>{self.code}</Code><Message>injected</Message></Error>".encode()
            headers = {"Content-Type": "application/xml"}
        else:
            data = json.dumps({"__type": self.code, "message": "injected", **self.extra}).encode()
            headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": self.code}
        return AWSResponse(request.url, self.status, headers, _Raw(data))


# botocore runs every before-send handler and keeps the first answer, so moto would still apply a request
# answered here with a fault. A faulted request must not reach the service: moto skips these.
_FAULTED: weakref.WeakSet[Any] = weakref.WeakSet()


def moto_skips_faulted_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.__call__
    if getattr(original, "skips_faulted", False):
        return

    def call(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        return None if request in _FAULTED else original(self, event_name, request, **kwargs)

    call.skips_faulted = True  # type: ignore[attr-defined]
    monkeypatch.setattr(BotocoreStubber, "__call__", call)


@pytest.fixture(autouse=True)
def _faults_never_reach_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    moto_skips_faulted_requests(monkeypatch)


def _protocol(event_name: str) -> str:
    service = event_name.split(".")[1]
    return {"s3": "rest-xml"}.get(service, "json")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoWorld]:
    w = MotoWorld(tmp_path)
    close = w.open()
    for k, v in w.names.env().items():
        monkeypatch.setenv(k, v)
    yield w
    close()


@pytest.fixture
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    return record_backoffs(monkeypatch)


def record_backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's retry sleeps (endpoint.time.sleep), recorded instead of slept."""
    waits: list[float] = []

    class Clock:
        def __getattr__(self, name: str) -> Any:
            import time

            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            waits.append(seconds)

    monkeypatch.setattr(botocore.endpoint, "time", Clock())
    return waits


# ---- the classifier -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "status", "service", "expected"),
    [
        ("ThrottlingException", 400, "sfn", True),
        ("ProvisionedThroughputExceededException", 400, "dynamodb", True),
        ("RequestLimitExceeded", 400, "dynamodb", True),
        ("LimitExceededException", 400, "dynamodb", True),
        ("LimitExceededException", 400, "kms", False),  # KMS: a resource quota, not a rate
        ("SlowDown", 503, "s3", True),
        ("RequestTimeout", 400, "s3", True),
        ("RequestThrottled", 400, "sqs", True),
        ("KMSInternalException", 500, "kms", True),
        ("WhateverBroke", 502, "scheduler", True),
        ("NotImplemented", 501, "s3", False),
        ("AccessDeniedException", 400, "dynamodb", False),
        ("ValidationException", 400, "dynamodb", False),
        ("ConditionalCheckFailedException", 400, "dynamodb", False),
        ("ResourceNotFoundException", 400, "dynamodb", False),
    ],
)
def test_which_error_answers_are_transient(code: str, status: int, service: str, expected: bool) -> None:
    assert faults.transient_response({"Error": {"Code": code}}, status, service=service) is expected


def test_a_cancelled_transaction_is_transient_only_for_throttling_or_conflict_reasons() -> None:
    def cancelled(*reasons: str) -> dict[str, Any]:
        return {
            "Error": {"Code": "TransactionCanceledException"},
            "CancellationReasons": [{"Code": r} for r in reasons],
        }

    assert faults.transient_response(cancelled("None", "ThrottlingError"), 400)
    assert faults.transient_response(cancelled("TransactionConflict"), 400)
    assert not faults.transient_response(cancelled("ConditionalCheckFailed", "ThrottlingError"), 400)
    assert not faults.transient_response(cancelled("ValidationError"), 400)


# ---- every adapter, at the wire ----------------------------------------------------------------------
def _records(world: MotoWorld, wire: WireFaults) -> Callable[[], Any]:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore

    store = DynamoDbRecordStore(world.names.records_table, client=wire.on(make_client("dynamodb")))
    return lambda: store.put("org", Put("thing", "p", "s", {"a": 1}))


def _queue(world: MotoWorld, wire: WireFaults) -> Callable[[], Any]:
    from ctxstore.adapters.aws.dynamodb_queue import DynamoDbWorkQueue

    queue = DynamoDbWorkQueue(world.names.jobs_table, client=wire.on(make_client("dynamodb")))
    return lambda: queue.enqueue("org", "databases", "job-1", {"op": "x"})


def _blobs(world: MotoWorld, wire: WireFaults) -> Callable[[], Any]:
    from ctxstore.adapters.aws.s3_blobs import S3BlobStore

    blobs = S3BlobStore(world.names.bucket, client=wire.on(make_client("s3")))
    return lambda: blobs.put("org", "k", b"data")


def _workflow(world: MotoWorld, wire: WireFaults) -> Callable[[], Any]:
    from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter

    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    machine = json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}})
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = sfn.create_state_machine(name="m", definition=machine, roleArn=role)["stateMachineArn"]
    starter = SfnWorkflowStarter(arn, client=wire.on(make_client("stepfunctions")))
    return lambda: starter.start("org", "ingest-1", {})


def _sqs(world: MotoWorld, wire: WireFaults) -> Callable[[], Any]:
    from ctxstore.adapters.aws.dynamodb_queue import DynamoDbWorkQueue
    from ctxstore.adapters.aws.sqs_queue import SqsRoutedWorkQueue

    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="hooks")["QueueUrl"]
    inner = DynamoDbWorkQueue(world.names.jobs_table)
    queue = SqsRoutedWorkQueue(inner, {"webhooks": url}, client=wire.on(make_client("sqs")))
    return lambda: queue.enqueue("org", "webhooks", "d-1", {"x": 1})


def _kms(world: MotoWorld, wire: WireFaults) -> Callable[[], Any]:
    from ctxstore.adapters.aws.kms_vault import KmsVault

    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]
    vault = KmsVault(key, client=wire.on(make_client("kms")))
    return lambda: vault.seal("org", "conn", b"secret")


def _scheduler(world: MotoWorld, wire: WireFaults) -> Callable[[], Any]:
    from ctxstore.adapters.aws.eventbridge_scheduler import EventBridgeScheduler

    boto3.client("scheduler", region_name=REGION).create_schedule_group(Name="connectors")
    target = f"arn:aws:lambda:{REGION}:123456789012:function:sync"
    role = "arn:aws:iam::123456789012:role/scheduler"
    s = EventBridgeScheduler("connectors", target_arn=target, role_arn=role, client=wire.on(make_client("scheduler")))
    return lambda: s.upsert("org", "c1", every_s=300, next_at=4_000_000_000.0, payload={})


ADAPTERS: dict[str, tuple[Callable[[MotoWorld, WireFaults], Callable[[], Any]], str, str]] = {
    # name: (build, throttling code, 5xx code)
    "dynamodb_records": (_records, "ProvisionedThroughputExceededException", "InternalServerError"),
    "dynamodb_queue": (_queue, "ThrottlingException", "InternalServerError"),
    "s3_blobs": (_blobs, "SlowDown", "InternalError"),
    "sfn_workflow": (_workflow, "ThrottlingException", "InternalServerException"),
    "sqs_queue": (_sqs, "RequestThrottled", "InternalError"),
    "kms_vault": (_kms, "ThrottlingException", "KMSInternalException"),
    "eventbridge_scheduler": (_scheduler, "ThrottlingException", "InternalServerException"),
}


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_throttling_that_outlasts_botocores_retries_raises_store_unavailable(
    world: MotoWorld, backoffs: list[float], name: str
) -> None:
    build, throttle, _ = ADAPTERS[name]
    status = 503 if throttle == "SlowDown" else 400
    wire = WireFaults(100, code=throttle, status=status)
    call = build(world, wire)
    with pytest.raises(StoreUnavailable) as raised:
        call()
    assert len(wire.faulted) == ATTEMPTS, "botocore retried the throttle itself first"
    assert len(backoffs) == ATTEMPTS - 1
    assert sum(backoffs) <= 3, "botocore's waits stay far inside an API request's 29 s"
    assert raised.value.retry_after_s >= 1
    assert isinstance(raised.value.__cause__, ClientError)


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_a_5xx_that_outlasts_botocores_retries_raises_store_unavailable(
    world: MotoWorld, backoffs: list[float], name: str
) -> None:
    build, _, fault = ADAPTERS[name]
    wire = WireFaults(100, code=fault, status=500)
    call = build(world, wire)
    with pytest.raises(StoreUnavailable):
        call()
    assert len(wire.faulted) == ATTEMPTS


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_a_short_throttle_is_absorbed_by_botocores_retries(world: MotoWorld, backoffs: list[float], name: str) -> None:
    build, throttle, _ = ADAPTERS[name]
    status = 503 if throttle == "SlowDown" else 400
    wire = WireFaults(ATTEMPTS - 1, code=throttle, status=status)
    call = build(world, wire)
    call()  # succeeds on the last attempt
    assert len(wire.faulted) == ATTEMPTS - 1 and len(backoffs) == ATTEMPTS - 1


@pytest.mark.parametrize("name", ["dynamodb_records", "s3_blobs", "sfn_workflow"])
def test_read_timeouts_become_store_unavailable(world: MotoWorld, backoffs: list[float], name: str) -> None:
    build, _, _ = ADAPTERS[name]
    wire = WireFaults(100, timeout=True)
    call = build(world, wire)
    with pytest.raises(StoreUnavailable) as raised:
        call()
    assert isinstance(raised.value.__cause__, ReadTimeoutError)
    assert len(wire.faulted) == ATTEMPTS


def test_access_denied_is_not_hidden_as_unavailable(world: MotoWorld, backoffs: list[float]) -> None:
    wire = WireFaults(1, code="AccessDeniedException", status=400)
    call = _records(world, wire)
    with pytest.raises(ClientError) as raised:
        call()
    assert not isinstance(raised.value, StoreUnavailable)
    assert raised.value.response["Error"]["Code"] == "AccessDeniedException"
    assert len(wire.faulted) == 1, "not retried"


def test_a_transaction_cancelled_by_throttling_is_unavailable_but_a_failed_condition_is_not(world: MotoWorld) -> None:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore

    ops = [Put("thing", "p", "a", {}), Put("thing", "p", "b", {})]
    throttled = WireFaults(1, code="TransactionCanceledException", extra={
        "CancellationReasons": [{"Code": "None"}, {"Code": "ThrottlingError", "Message": "Throughput exceeds"}]
    })  # fmt: skip
    store = DynamoDbRecordStore(world.names.records_table, client=throttled.on(make_client("dynamodb")))
    with pytest.raises(StoreUnavailable):
        store.transact("org", ops)
    conflict = WireFaults(1, code="TransactionCanceledException", extra={
        "CancellationReasons": [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}]
    })  # fmt: skip
    store = DynamoDbRecordStore(world.names.records_table, client=conflict.on(make_client("dynamodb")))
    with pytest.raises(ConditionFailed):
        store.transact("org", ops)
    store.transact("org", ops)  # the wire is clear again: the transaction goes through


def test_kms_throttling_is_unavailable_not_a_vault_error(world: MotoWorld, backoffs: list[float]) -> None:
    from ctxstore.adapters.aws.kms_vault import KmsVault

    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]
    sealed = KmsVault(key).seal("org", "conn", b"secret")
    wire = WireFaults(100, code="ThrottlingException", operations=("Decrypt",))
    vault = KmsVault(key, client=wire.on(make_client("kms")))
    with pytest.raises(StoreUnavailable):
        vault.open("org", "conn", sealed)


# ---- through an API function ------------------------------------------------------------------------
def session_faults(monkeypatch: pytest.MonkeyPatch, wire: WireFaults, service: str) -> None:
    """Register `wire` on the default boto3 session: every client a function builds from now on has it."""
    moto_skips_faulted_requests(monkeypatch)
    if not isinstance(boto3.DEFAULT_SESSION, _FaultySession):
        monkeypatch.setattr(boto3, "DEFAULT_SESSION", _FaultySession())
    boto3.DEFAULT_SESSION.events.register_first(f"before-send.{service}", wire)


class _FaultySession(boto3.Session):
    """A fresh default session for one test (the monkeypatch puts the previous one back)."""


@pytest.mark.parametrize("route", ["api_databases_list", "api_context_ingest_status"])
def test_a_throttled_dynamodb_answers_503_with_retry_after_never_500(
    aws: MotoWorld,  # noqa: F811
    backoffs: list[float],
    monkeypatch: pytest.MonkeyPatch,
    route: str,
) -> None:
    key = new_key("acme-org")
    wire = WireFaults(10_000, code="ProvisionedThroughputExceededException")
    session_faults(monkeypatch, wire, "dynamodb")
    fn = load_function(route.removesuffix("_list").removesuffix("_status"))
    resp = fn.handler(event(route, key), FakeContext())
    assert resp["statusCode"] == 503, resp
    assert int(resp["headers"]["retry-after"]) >= 1
    assert body(resp)["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert wire.faulted, "the fault reached the function's client"


def test_an_unexpected_aws_error_answers_the_500_envelope(
    aws: MotoWorld,  # noqa: F811
    backoffs: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AccessDenied is a deployment bug, not a transient fault: 500 in the envelope, never a 503."""
    key = new_key("acme-org")
    wire = WireFaults(10_000, code="AccessDeniedException")
    session_faults(monkeypatch, wire, "dynamodb")
    fn = load_function("api_databases")
    resp = fn.handler(event("api_databases_list", key), FakeContext())
    assert resp["statusCode"] == 500, resp
    assert body(resp)["error"]["code"] == "INTERNAL_ERROR"
    assert "retry-after" not in resp["headers"]


# ---- the bounded starter ---------------------------------------------------------------------------------
def test_slots_are_freed_by_stopped_executions_and_held_for_ones_being_started(world: MotoWorld) -> None:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore
    from ctxstore.adapters.aws.ingest_starts import FRESH_S, ExecutionSlots

    statuses: dict[str, str | None] = {}
    now = [1000.0]
    records = DynamoDbRecordStore(world.names.records_table)
    slots = ExecutionSlots(records, statuses.get, 2, clock=lambda: now[0])
    other = ExecutionSlots(records, statuses.get, 2, clock=lambda: now[0])  # the second starter, same record
    assert slots.take("a") and other.take("b")
    assert not slots.take("c"), "both slots held by executions being started"
    statuses.update(a="RUNNING", b="SUCCEEDED")
    assert other.take("c"), "b stopped: its slot is free"
    assert not slots.take("d"), "a runs, c is being started"
    now[0] += FRESH_S + 1
    assert slots.take("d"), "c never appeared within FRESH_S: its start failed, the slot is free"
    assert set(slots.held()) == {"a", "d"}
    slots.give_back("d")
    assert set(other.held()) == {"a"}


def test_a_throttled_start_is_reported_for_later_and_its_slot_given_back(
    world: MotoWorld, backoffs: list[float]
) -> None:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore
    from ctxstore.adapters.aws.ingest_starts import BoundedStarts, ExecutionSlots
    from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter

    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    machine = json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}})
    sfn_client = boto3.client("stepfunctions", region_name=REGION)
    arn = sfn_client.create_state_machine(name="m", definition=machine, roleArn=role)["stateMachineArn"]
    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="starts")["QueueUrl"]
    wire = WireFaults(ATTEMPTS, code="ThrottlingException", operations=("StartExecution",))
    sfn = SfnWorkflowStarter(arn, client=wire.on(make_client("stepfunctions")))
    slots = ExecutionSlots(DynamoDbRecordStore(world.names.records_table), sfn.status, 1)
    starts = BoundedStarts(sfn=sfn, slots=slots, sqs=make_client("sqs"), queue_url=url, poll_s=0.01)

    def message(i: int) -> dict[str, Any]:
        body = {"org": "org", "execution_name": f"ingest-{i}", "payload": {}}
        return {"messageId": f"m{i}", "receiptHandle": f"h{i}", "body": json.dumps(body)}

    out = starts.run([message(1), message(2)], remaining_s=0.0)
    # m1.s start was throttled past botocore's retries: reported, slot given back; m2 then started.
    assert out == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert [e["name"] for e in sfn_client.list_executions(stateMachineArn=arn)["executions"]] == [
        execution_name_of("org", "ingest-2")
    ]


def execution_name_of(org: str, name: str) -> str:
    from ctxstore.adapters.aws.sfn_workflow import execution_name

    return execution_name(org, name)
