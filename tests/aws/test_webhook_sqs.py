"""Webhook deliveries on SQS under moto: the routed queue, the dispatch function and partial-batch failures.

Deliveries go to a real HTTP receiver on 127.0.0.1 (moto intercepts boto3, not the webhook sender's
httpx). Lambda's SQS trigger is played by the test: it receives a batch from moto's queue, hands it to
`functions/webhook_dispatch` as an SQS event, then deletes the messages not listed in
`batchItemFailures` (what the event source mapping does with ReportBatchItemFailures).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from ctxstore.services.access.principal import Principal
from ctxstore.services.webhooks.events import INDEXING_STATUS_CHANGED
from tests.api.test_webhooks import Receiver, receiver  # noqa: F401 (fixture)
from tests.aws.moto_env import REGION, MotoWorld, template
from tests.aws.test_handlers import FakeContext, aws, event, load_function  # noqa: F401 (aws: fixture)


def _queue(monkeypatch: pytest.MonkeyPatch, max_attempts: int = 3) -> str:
    sqs = boto3.client("sqs", region_name=REGION)
    props = template()["Resources"]["WebhookQueue"]["Properties"]
    attrs = {"VisibilityTimeout": str(props["VisibilityTimeout"])}
    url: str = sqs.create_queue(QueueName="webhooks", Attributes=attrs)["QueueUrl"]
    monkeypatch.setenv("CTXSTORE_WEBHOOK_QUEUE_URL", url)
    monkeypatch.setenv("CTXSTORE_ALLOW_PRIVATE_WEBHOOKS", "true")
    monkeypatch.setenv("CTXSTORE_WEBHOOK_MAX_ATTEMPTS", str(max_attempts))
    monkeypatch.setenv("CTXSTORE_WEBHOOK_RETRY_INTERVAL_S", "30")
    monkeypatch.setenv("CTXSTORE_WEBHOOK_RETRY_MAX_DELAY_S", "60")
    return url


def _trigger(fn: Any, url: str) -> tuple[list[str], dict[str, Any]]:
    """One event-source-mapping poll: receive, invoke, delete what the function did not report."""
    sqs = boto3.client("sqs", region_name=REGION)
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages", [])
    records = [
        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
         "attributes": m["Attributes"], "eventSource": "aws:sqs"}
        for m in msgs
    ]  # fmt: skip
    result: dict[str, Any] = fn.handler({"Records": records}, FakeContext())
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    for m in msgs:
        if m["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return [m["MessageId"] for m in msgs], result


def _visible_now(url: str) -> int:
    attrs = boto3.client("sqs", region_name=REGION).get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def test_deliveries_fan_out_on_sqs_and_only_failures_come_back(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    receiver: Receiver,  # noqa: F811
) -> None:
    url = _queue(monkeypatch)
    fn = load_function("webhook_dispatch")
    svc = fn.handler.services
    hooks = [svc.keys.create("acme-org") for _ in range(2)]  # two keys, two webhooks: one event, two deliveries
    for k in hooks:
        svc.webhooks.register(Principal("acme-org", k.split("_")[1]), receiver.url, None, None, False)
    receiver.statuses = [503]  # the first POST fails, every later one succeeds
    svc.webhooks.emit("acme-org", INDEXING_STATUS_CHANGED, {"id": "doc-1", "indexing_status": "completed"})
    assert fn.handler.container.queue.pending("webhooks") == 2
    assert fn.handler.container.queue.claim("webhooks", lease_s=30) == []  # the sweep worker never polls SQS jobs

    visibility = _spy_visibility(fn, monkeypatch)
    ids, result = _trigger(fn, url)
    assert len(ids) == 2 and receiver.count() == 2
    [failed] = [f["itemIdentifier"] for f in result["batchItemFailures"]]  # exactly the 503 one
    # its visibility was set to the policy's first backoff (full jitter up to 30 s); the other was deleted
    [(receipt, timeout)] = visibility
    assert failed in ids
    assert 0 <= timeout <= 30
    assert fn.handler.container.queue.pending("webhooks") == 1
    # the backoff elapses (moto keeps its own clock): the message becomes visible again
    boto3.client("sqs", region_name=REGION).change_message_visibility(
        QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=0
    )
    ids2, result2 = _trigger(fn, url)
    assert len(ids2) == 1 and result2["batchItemFailures"] == []
    assert receiver.count() == 3 and fn.handler.container.queue.pending("webhooks") == 0
    listed = [svc.webhooks.list_deliveries(Principal("acme-org", k.split("_")[1]), None, None, None) for k in hooks]
    statuses = sorted(d["status"] for page in listed for d in page["deliveries"])
    assert statuses == ["completed", "completed"]


def _spy_visibility(fn: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    calls: list[tuple[str, int]] = []
    client = fn.handler.container.queue._sqs
    real = client.change_message_visibility

    def spy(**kw: Any) -> Any:
        calls.append((kw["ReceiptHandle"], kw["VisibilityTimeout"]))
        return real(**kw)

    monkeypatch.setattr(client, "change_message_visibility", spy)
    return calls


def test_a_delivery_that_never_succeeds_is_given_up_and_leaves_the_queue(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    receiver: Receiver,  # noqa: F811
) -> None:
    url = _queue(monkeypatch, max_attempts=2)
    fn = load_function("webhook_dispatch")
    svc = fn.handler.services
    key = svc.keys.create("acme-org")
    principal = Principal("acme-org", key.split("_")[1])
    svc.webhooks.register(principal, receiver.url, None, None, False)
    receiver.default = 500
    svc.webhooks.emit("acme-org", INDEXING_STATUS_CHANGED, {"id": "doc-1", "indexing_status": "errored"})
    visibility = _spy_visibility(fn, monkeypatch)
    _, first = _trigger(fn, url)
    assert len(first["batchItemFailures"]) == 1
    boto3.client("sqs", region_name=REGION).change_message_visibility(
        QueueUrl=url, ReceiptHandle=visibility[0][0], VisibilityTimeout=0
    )
    _, second = _trigger(fn, url)  # attempt 2 of 2: given up, so not reported; the function deleted it
    assert second["batchItemFailures"] == [] and receiver.count() == 2
    assert fn.handler.container.queue.pending("webhooks") == 0
    [delivery] = svc.webhooks.list_deliveries(principal, None, None, None)["deliveries"]
    assert delivery["status"] == "permanently_failed"


def test_an_unreadable_record_is_reported_not_lost(aws: MotoWorld, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    _queue(monkeypatch)
    fn = load_function("webhook_dispatch")
    ev = event("webhook_dispatch")
    ev["Records"].append(dict(ev["Records"][0], messageId="broken", body="{not json"))
    result = fn.handler(ev, FakeContext())
    # the sample's delivery names an unknown webhook: handled (recorded), so only the broken record comes back
    assert result == {"batchItemFailures": [{"itemIdentifier": "broken"}]}


def test_template_wires_the_queue_the_trigger_and_the_senders() -> None:
    res = template()["Resources"]
    fn = res["WebhookDispatchFunction"]["Properties"]
    [ev] = fn["Events"].values()
    assert ev["Type"] == "SQS" and ev["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queue = res["WebhookQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * fn["Timeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] > 8  # above the default webhook_max_attempts
    assert res["WebhookDeadLettersAlarm"]["Properties"]["Dimensions"][0]["Value"] == {
        "GetAtt": "WebhookDeadLetters.QueueName"
    }
    # the functions that may send to the queue all write records (a status change is a record write); which ones
    # send is proven call by call in tests/aws/test_iam_coverage.py (the ingest tasks that move a status do)
    senders = set()
    for name, r in res.items():
        if r["Type"] != "AWS::Serverless::Function" or name == "WebhookDispatchFunction":
            continue
        policies = r["Properties"].get("Policies", [])
        writes = any(
            "dynamodb:UpdateItem" in st["Action"] and st["Resource"] == {"GetAtt": "RecordsTable.Arn"}
            for p in policies
            for st in p.get("Statement", [])
        )
        sends = any(
            p.get("SQSSendMessagePolicy", {}).get("QueueName") == {"GetAtt": "WebhookQueue.QueueName"} for p in policies
        )
        assert writes or not sends, name
        if sends:
            senders.add(name)
    assert {"IngestParseFunction", "IngestIndexFunction", "IngestCompleteFunction", "IngestErroredFunction"} <= senders
