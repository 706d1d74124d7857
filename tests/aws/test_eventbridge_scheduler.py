"""EventBridge Scheduler adapter under moto: upsert creates then replaces, cancel deletes once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

from ctxstore.adapters.aws.eventbridge_scheduler import EventBridgeScheduler, rate_expression, schedule_name
from tests.aws.moto_env import REGION, MotoWorld

TARGET = "arn:aws:lambda:us-east-1:123456789012:function:ctxstore-dev-job-worker"
ROLE = "arn:aws:iam::123456789012:role/ctxstore-dev-scheduler"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[MotoWorld]:
    w = MotoWorld(tmp_path)
    close = w.open()
    boto3.client("scheduler", region_name=REGION).create_schedule_group(Name="connectors")
    yield w
    close()


def test_upsert_creates_then_replaces_and_cancel_deletes_once(world: MotoWorld) -> None:
    s = EventBridgeScheduler("connectors", target_arn=TARGET, role_arn=ROLE)
    client = boto3.client("scheduler", region_name=REGION)
    start = 1_800_000_000.0
    s.upsert("org1", "sync/drive", every_s=3600, next_at=start, payload={"connector": "drive"})
    got = client.get_schedule(Name=schedule_name("org1", "sync/drive"), GroupName="connectors")
    assert got["ScheduleExpression"] == "rate(60 minutes)"
    assert got["StartDate"] == datetime.fromtimestamp(start, tz=UTC)
    assert got["Target"]["Arn"] == TARGET and got["Target"]["RoleArn"] == ROLE
    assert json.loads(got["Target"]["Input"]) == {
        "schedule": {"schedule_id": "sync/drive", "org": "org1", "every_s": 3600, "payload": {"connector": "drive"}}
    }
    s.upsert("org1", "sync/drive", every_s=90, next_at=start, payload={"connector": "drive", "v": 2})
    [listed] = client.list_schedules(GroupName="connectors")["Schedules"]
    assert listed["Name"] == schedule_name("org1", "sync/drive")
    got = client.get_schedule(Name=listed["Name"], GroupName="connectors")
    assert got["ScheduleExpression"] == "rate(2 minutes)"
    assert json.loads(got["Target"]["Input"])["schedule"]["payload"]["v"] == 2
    s.upsert("org2", "sync/drive", every_s=60, next_at=start, payload={})  # same id, another org: its own
    assert len(client.list_schedules(GroupName="connectors")["Schedules"]) == 2
    assert s.cancel("org1", "sync/drive") is True
    assert s.cancel("org1", "sync/drive") is False
    assert [x["Name"] for x in client.list_schedules(GroupName="connectors")["Schedules"]] == [
        schedule_name("org2", "sync/drive")
    ]
    assert s.due(start + 10**6) == []  # pushed by EventBridge, never polled


@pytest.mark.parametrize(("every_s", "expr"), [(1, "rate(1 minute)"), (60, "rate(1 minute)"), (61, "rate(2 minutes)")])
def test_rates_round_up_to_whole_minutes(every_s: int, expr: str) -> None:
    assert rate_expression(every_s) == expr


def test_names_are_valid_distinct_and_bounded() -> None:
    names = {schedule_name(o, i) for o, i in [("a", "b-c"), ("a-b", "c"), ("o", "x" * 300), ("o", "ü/ß")]}
    assert len(names) == 4
    assert all(len(n) <= 64 and all((c.isalnum() and c.isascii()) or c in "-_." for c in n) for n in names)


def test_build_aws_wires_the_scheduler_once_configured(world: MotoWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws

    for k, v in world.names.env().items():
        monkeypatch.setenv(k, v)
    assert build_aws(Settings()).scheduler is None
    monkeypatch.setenv("CTXSTORE_SCHEDULER_GROUP", "connectors")
    monkeypatch.setenv("CTXSTORE_SCHEDULER_TARGET_ARN", TARGET)
    monkeypatch.setenv("CTXSTORE_SCHEDULER_ROLE_ARN", ROLE)
    scheduler = build_aws(Settings()).scheduler
    assert isinstance(scheduler, EventBridgeScheduler)
    scheduler.upsert("org1", "s1", every_s=300, next_at=1_800_000_000.0, payload={})
    assert boto3.client("scheduler", region_name=REGION).list_schedules(GroupName="connectors")["Schedules"]
