"""Connectors on the AWS backend under moto: the api_connectors and connector_sync functions, imported as Lambda
imports them, with their events/ samples. Records in DynamoDB, credentials sealed by KMS, one EventBridge
Scheduler schedule per connector, items started on Step Functions; the Slack SDK talks to the fake Slack API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.aws.moto_env import REGION, MotoWorld
from tests.aws.test_handlers import FakeContext, body, event, load_function, new_key
from tests.fakes.slack_api import FakeSlack

ORG = "acme-org"
TOKEN = "xoxb-aws-secret-token"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MotoWorld, FakeSlack, dict[str, str]]]:
    w = MotoWorld(tmp_path)
    close = w.open()
    slack = FakeSlack().start()
    kms = boto3.client("kms", region_name=REGION)
    key_arn = kms.create_key(Description="connector credentials")["KeyMetadata"]["Arn"]
    boto3.client("scheduler", region_name=REGION).create_schedule_group(Name="connectors")
    sfn = boto3.client("stepfunctions", region_name=REGION)
    iam_role = "arn:aws:iam::123456789012:role/sfn"
    machine = sfn.create_state_machine(
        name="ingest",
        roleArn=iam_role,
        definition=json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}),
    )["stateMachineArn"]
    env = {
        **w.names.env(),
        "CTXSTORE_CONNECTOR_KMS_KEY_ID": key_arn,
        "CTXSTORE_SCHEDULER_GROUP": "connectors",
        "CTXSTORE_SCHEDULER_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:ctxstore-dev-connector-sync",
        "CTXSTORE_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/ctxstore-dev-scheduler",
        "CTXSTORE_STATE_MACHINE_ARN": machine,
        "CTXSTORE_CONNECTOR_BASE_URL_SLACK": slack.base_url,
        "CTXSTORE_CONNECTOR_TOKEN_URL_SLACK": slack.base_url,
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_SERVICE_NAME": "ctxstore",
        "POWERTOOLS_METRICS_NAMESPACE": "ctxstore",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        yield w, slack, env
    finally:
        slack.stop()
        close()


def _ready_database() -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws
    from ctxstore.services.access.principal import Principal
    from ctxstore.services.registry import build_services

    svc = build_services(build_aws(Settings()))
    svc.databases.create(Principal(ORG, "test"), "acme", None, "database_metadata_schema")
    svc.databases.provision(ORG, "acme")


def _records(table: str, kind: str) -> list[dict[str, Any]]:
    ddb = boto3.client("dynamodb", region_name=REGION)
    items = ddb.scan(TableName=table)["Items"]
    return [i for i in items if i["pk"]["S"].startswith(f"{ORG}#{kind}#")]


def test_connector_api_and_scheduled_sync_on_aws(world: tuple[MotoWorld, FakeSlack, dict[str, str]]) -> None:
    w, slack, _ = world
    slack.add_token(TOKEN)
    slack.add_channel("C0123456789", "general")
    now = time.time()
    parent = slack.post("C0123456789", "Alice deployed the billing service", at=now - 2 * 86400)
    slack.post("C0123456789", "Bob: confirmed", thread_ts=parent, at=now - 2 * 86400 + 30)
    key = new_key(ORG)
    _ready_database()

    api = load_function("api_connectors")
    create = event("api_connectors_create", key)
    create["body"] = create["body"].replace("xoxb-replace-with-a-bot-token", TOKEN)
    resp = api.handler(create, FakeContext())
    assert resp["statusCode"] == 201, resp
    cid = body(resp)["data"]["connector_id"]
    assert TOKEN not in resp["body"]

    # Records in DynamoDB; the credentials only as a KMS ciphertext bound to org and connector.
    [cred] = _records(w.names.records_table, "connector_credentials")
    sealed = json.loads(cred["body"]["S"])["sealed"]
    assert sealed.startswith("kms1:") and TOKEN not in json.dumps(cred)
    assert len(_records(w.names.records_table, "connector")) == 1

    configure = event("api_connectors_configure", key)
    configure["rawPath"] = configure["requestContext"]["http"]["path"] = f"/connectors/{cid}/configure"
    resp = api.handler(configure, FakeContext())
    assert resp["statusCode"] == 200, resp
    assert body(resp)["data"]["configured"] == 1 and body(resp)["data"]["run_id"]

    # The configure-triggered chunk runs in connector_sync (as the jobs table's stream would wake it).
    sync = load_function("connector_sync")
    out = sync.handler({"Records": []}, FakeContext(remaining_ms=900_000))
    assert out == {"queued": 0, "ran": 1}
    data = body(api.handler(_get(event("api_connectors_create", key), cid), FakeContext()))["data"]
    assert data["documents_dispatched"] == 2 and data["sync_cycles_completed"] == 1 and data["last_error"] == ""
    executions = boto3.client("stepfunctions", region_name=REGION).list_executions(
        stateMachineArn=world[2]["CTXSTORE_STATE_MACHINE_ARN"]
    )["executions"]
    assert len(executions) == 2, "each synced message started its ingestion workflow"

    # One EventBridge Scheduler schedule per connector, re-anchored at next_sync_at, invoking connector_sync.
    scheduler = boto3.client("scheduler", region_name=REGION)
    [listed] = scheduler.list_schedules(GroupName="connectors")["Schedules"]
    got = scheduler.get_schedule(Name=listed["Name"], GroupName="connectors")
    assert got["ScheduleExpression"] == "rate(60 minutes)"
    assert json.loads(got["Target"]["Input"])["schedule"]["payload"] == {"connector_id": cid}
    assert got["Target"]["Arn"].endswith("connector-sync")

    # The schedule fires (EventBridge invokes with the sample's shape): an incremental chunk, nothing new.
    slack.post("C0123456789", "Carol: a new message")
    fired = json.loads(Path(__file__).parents[2].joinpath("events/connector_sync.json").read_text())
    fired["schedule"].update(schedule_id=cid, org=ORG, payload={"connector_id": cid})
    assert sync.handler(fired, FakeContext(remaining_ms=900_000)) == {"queued": 1, "ran": 1}
    data = body(api.handler(_get(event("api_connectors_create", key), cid), FakeContext()))["data"]
    assert data["documents_dispatched"] == 3 and data["sync_cycles_completed"] == 2
    assert data["last_run"]["trigger"] == "schedule"

    resp = api.handler(_delete(event("api_connectors_create", key), cid), FakeContext())
    assert resp["statusCode"] == 200
    assert scheduler.list_schedules(GroupName="connectors")["Schedules"] == []
    assert _records(w.names.records_table, "connector_credentials") == []


def _get(ev: dict[str, Any], cid: str) -> dict[str, Any]:
    ev.pop("body", None)
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = f"/connectors/{cid}"
    ev["requestContext"]["http"]["method"] = "GET"
    return ev


def _delete(ev: dict[str, Any], cid: str) -> dict[str, Any]:
    ev = _get(ev, cid)
    ev["requestContext"]["http"]["method"] = "DELETE"
    return ev


def test_kms_vault_binds_ciphertexts_to_their_connector(world: tuple[MotoWorld, FakeSlack, dict[str, str]]) -> None:
    from ctxstore.adapters.aws.kms_vault import KmsVault
    from ctxstore.ports.credential_vault import VaultError

    vault = KmsVault(world[2]["CTXSTORE_CONNECTOR_KMS_KEY_ID"])
    sealed = vault.seal("org1", "conn_a", b"secret")
    assert vault.open("org1", "conn_a", sealed) == b"secret"
    with pytest.raises(VaultError):
        vault.open("org1", "conn_b", sealed)
    with pytest.raises(VaultError):
        vault.seal("org1", "conn_a", b"x" * 5000)
