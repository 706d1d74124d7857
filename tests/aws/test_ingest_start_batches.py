"""The API's queued ingestion starts go to SQS ten a call (SendMessageBatch), under moto; the batches keep
within SQS's 256 KiB a call, and an entry the batch reports failed is sent again on its own."""

from __future__ import annotations

import json
from typing import Any

import boto3

from ctxstore.adapters.aws import ingest_starts
from ctxstore.adapters.aws.ingest_starts import SQS_BATCH_BYTES, SqsWorkflowStarter
from tests.aws.moto_env import REGION, MotoWorld
from tests.aws.test_aws_adapters import world  # noqa: F401 (fixture)


def _received(url: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name=REGION)
    out: list[dict[str, Any]] = []
    while msgs := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        out += [json.loads(m["Body"]) for m in msgs]
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)]
        )
    return out


def _calls(client: Any) -> list[str]:
    """The SQS operations the starter's own client sends (observed through botocore's events)."""
    seen: list[str] = []
    client.meta.events.register("before-call.sqs.*", lambda model, **_: seen.append(model.name))
    return seen


def test_23_starts_go_in_three_calls_and_all_arrive(world: MotoWorld) -> None:  # noqa: F811
    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="ingest-start")["QueueUrl"]
    client = boto3.client("sqs", region_name=REGION)
    calls = _calls(client)
    starter = SqsWorkflowStarter(url, client=client)
    starts = [(f"ingest/db/item-{i}/v1", {"ref": {"item_id": f"item-{i}"}, "version": "v1"}) for i in range(23)]
    assert starter.start_many("org1", starts) == [True] * 23
    assert calls == ["SendMessageBatch"] * 3
    got = sorted(_received(url), key=lambda b: int(b["execution_name"].split("-")[1].split("/")[0]))
    assert [b["execution_name"] for b in got] == [name for name, _ in starts]
    assert all(b["org"] == "org1" for b in got) and got[5]["payload"] == starts[5][1]


def test_batches_keep_within_the_byte_limit_of_a_call() -> None:
    bodies = ["x" * 100_000] * 5 + ["y"] * 12
    groups = ingest_starts._batches(bodies)
    assert [len(g) for g in groups] == [2, 2, 10, 3]
    assert all(sum(len(b) for b in g) <= SQS_BATCH_BYTES and len(g) <= 10 for g in groups)
    assert [b for g in groups for b in g] == bodies


def test_an_entry_the_batch_reports_failed_is_sent_again_alone(world: MotoWorld) -> None:  # noqa: F811
    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="ingest-start")["QueueUrl"]
    client = boto3.client("sqs", region_name=REGION)
    calls = _calls(client)

    def fail_one(parsed: dict[str, Any], **_: Any) -> None:  # the service's partial answer, as AWS documents it
        entry = parsed["Successful"].pop(1)
        parsed.setdefault("Failed", []).append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"})

    client.meta.events.register("after-call.sqs.SendMessageBatch", lambda parsed, **kw: fail_one(parsed))
    starter = SqsWorkflowStarter(url, client=client)
    starts = [(f"ingest/item-{i}", {"version": "v1"}) for i in range(4)]
    assert starter.start_many("org1", starts) == [True] * 4
    assert calls == ["SendMessageBatch", "SendMessage"]
    names = [b["execution_name"] for b in _received(url)]
    # moto queued all four from the batch; the resend adds the one reported failed again (a repeated start is
    # dropped by the starter function, ExecutionAlreadyExists)
    assert sorted(set(names)) == sorted(n for n, _ in starts) and names.count("ingest/item-1") == 2
