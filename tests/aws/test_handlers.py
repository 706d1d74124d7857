"""Each Lambda handler, imported as Lambda would import it, invoked with its events/ sample under moto.

The tables and bucket come from template.yaml's definitions (tests/aws/moto_env.py); the functions
build their container from the same CTXSTORE_* variables the template sets.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from tests.aws.moto_env import REGION, ROOT, MotoWorld

EVENTS = ROOT / "events"


@dataclass
class FakeContext:
    """The attributes of a Lambda context object that Powertools and Mangum read."""

    function_name: str = "ctxstore-test"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:ctxstore-test"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    log_group_name: str = "/aws/lambda/ctxstore-test"
    log_stream_name: str = "2026/01/01/[$LATEST]0"
    remaining_ms: int = 300_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoWorld]:
    world = MotoWorld(tmp_path)
    close = world.open()
    for k, v in world.names.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "ctxstore")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ctxstore")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    yield world
    close()


def load_function(name: str) -> ModuleType:
    """Import functions/<name>/app.py fresh (a cold start), under a unique module name."""
    path = ROOT / "functions" / name / "app.py"
    mod_name = f"_fn_{name}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def event(name: str, key: str | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    if key is not None:
        ev["headers"]["authorization"] = f"Bearer {key}"
    return ev


def new_key(org: str = "acme-org") -> str:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws
    from ctxstore.services.access.keys import KeyService

    c = build_aws(Settings())
    return KeyService(c.records, c.clock).create(org)


def body(resp: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resp["body"])
    return data


def test_health(aws: MotoWorld) -> None:
    fn = load_function("api_health")
    resp = fn.handler(event("api_health"), FakeContext())
    assert resp["statusCode"] == 200, resp
    assert body(resp)["status"] == "ok"
    assert resp["headers"]["x-api-version"].startswith("2.")


def test_databases_rejects_a_missing_key(aws: MotoWorld) -> None:
    fn = load_function("api_databases")
    ev = event("api_databases_create")
    del ev["headers"]["authorization"]
    resp = fn.handler(ev, FakeContext())
    assert resp["statusCode"] == 401, resp
    assert body(resp)["error"]["code"] == "UNAUTHORIZED" or "UNAUTHORIZED" in resp["body"]


def test_create_database_then_worker_provisions_it(aws: MotoWorld) -> None:
    key = new_key()
    api = load_function("api_databases")
    resp = api.handler(event("api_databases_create", key), FakeContext())
    assert resp["statusCode"] == 202, resp
    assert "acme" in resp["body"]

    ddb = boto3.client("dynamodb", region_name=REGION)
    item = ddb.get_item(
        TableName=aws.names.records_table, Key={"pk": {"S": "acme-org#database#"}, "sk": {"S": ".acme"}}
    ).get("Item")
    assert item is not None, "the database record is in DynamoDB"
    assert json.loads(item["body"]["S"])["status"] == "provisioning"
    jobs = ddb.query(
        TableName=aws.names.jobs_table,
        KeyConditionExpression="pk = :q",
        ExpressionAttributeValues={":q": {"S": "databases"}},
    )["Items"]
    assert len(jobs) == 1 and jobs[0]["org"]["S"] == "acme-org"

    # The job worker, woken by the stream record of that insert, provisions the database.
    worker = load_function("job_worker")
    out = worker.handler(event("job_worker_stream"), FakeContext())
    assert out == {"ran": 1}
    status = api.handler(event("api_databases_status", key), FakeContext())
    assert status["statusCode"] == 200, status
    assert "ready" in status["body"]
    assert worker.handler(event("job_worker_schedule"), FakeContext()) == {"ran": 0}

    listed = api.handler(event("api_databases_list", key), FakeContext())
    assert listed["statusCode"] == 200 and "acme" in listed["body"]

    again = api.handler(event("api_databases_create", key), FakeContext())
    assert again["statusCode"] == 409, again


def test_worker_leaves_time_for_a_job_to_finish(aws: MotoWorld) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws

    c = build_aws(Settings())
    c.queue.enqueue("acme-org", "databases", "j1", {"op": "provision", "database": "nope"})
    worker = load_function("job_worker")
    assert worker.handler(event("job_worker_schedule"), FakeContext(remaining_ms=10_000)) == {"ran": 0}
    assert c.queue.pending("databases") == 1


def test_cold_start_import_times(aws: MotoWorld, capsys: pytest.CaptureFixture[str]) -> None:
    """Cold-start proxy: time to import each handler module in this (warm) interpreter; the fresh-process
    numbers, the Lambda way, come from bench/aws/lambda_imports.py (bench/results/lambda_imports.json)."""
    times: dict[str, float] = {}
    for name in ("api_health", "api_databases", "job_worker"):
        t0 = time.perf_counter()
        load_function(name)
        times[name] = round((time.perf_counter() - t0) * 1000, 1)
    with capsys.disabled():
        print(f"\nhandler module import (warm interpreter, ms): {times}")
    assert all(v < 5000 for v in times.values())
