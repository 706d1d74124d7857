"""moto environments built from template.yaml's own resource definitions.

Tables and the bucket are created with the key schemas, indexes and TTL settings written in
template.yaml, so the adapters are tested against the shapes that deploy.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from tests.support.cfn_template import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"

_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


def _serialise_moto_requests() -> None:
    """Make moto handle one request at a time.

    DynamoDB applies a conditional write atomically per item (the condition is checked and the
    write applied as one step); moto checks and writes in plain Python without a lock, so two
    threads can both pass the same condition. Serialising moto's request handling restores the
    guarantee the real service gives, so the concurrency contract tests test the adapter, not moto.
    """
    from moto.core.botocore_stubber import BotocoreStubber

    if getattr(BotocoreStubber, "_ctxstore_serialised", False):
        return
    lock = threading.RLock()
    original = BotocoreStubber.process_request

    def process_request(self: BotocoreStubber, request: Any) -> Any:
        with lock:
            return original(self, request)

    BotocoreStubber.process_request = process_request  # type: ignore[method-assign]
    BotocoreStubber._ctxstore_serialised = True  # type: ignore[attr-defined]


_serialise_moto_requests()


@cache
def set_minimal_aws_env(monkeypatch: Any, **extra: str) -> None:
    """The least CTXSTORE_* environment `build_aws(Settings())` accepts, plus `extra` (for wiring tests)."""
    env = {
        "AWS_DEFAULT_REGION": REGION,
        "CTXSTORE_BACKEND": "aws",
        "CTXSTORE_RECORDS_TABLE": "r",
        "CTXSTORE_JOBS_TABLE": "j",
        "CTXSTORE_BLOB_BUCKET": "b",
        **extra,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def template() -> dict[str, Any]:
    data: dict[str, Any] = load_template(TEMPLATE)
    return data


def resource(logical_id: str) -> dict[str, Any]:
    res: dict[str, Any] = template()["Resources"][logical_id]
    return res


def create_table_from_template(ddb: Any, logical_id: str, name: str) -> None:
    props = resource(logical_id)["Properties"]
    args: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props["BillingMode"],
    }
    if "GlobalSecondaryIndexes" in props:
        args["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    if "StreamSpecification" in props:
        args["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    if props.get("SSESpecification", {}).get("SSEEnabled"):
        args["SSESpecification"] = {"Enabled": True}
    ddb.create_table(**args)
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)


def create_bucket_from_template(s3: Any, name: str) -> None:
    props = resource("BlobBucket")["Properties"]
    s3.create_bucket(Bucket=name)
    # CloudFormation's ServerSideEncryptionByDefault is the API's ApplyServerSideEncryptionByDefault.
    rules = [
        {"ApplyServerSideEncryptionByDefault": r["ServerSideEncryptionByDefault"]}
        for r in props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    ]
    s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules})
    s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"])


@dataclass
class AwsNames:
    records_table: str = "ctxstore-test-records"
    jobs_table: str = "ctxstore-test-jobs"
    bucket: str = "ctxstore-test-blobs"

    def env(self) -> dict[str, str]:
        return {
            "CTXSTORE_BACKEND": "aws",
            "CTXSTORE_RECORDS_TABLE": self.records_table,
            "CTXSTORE_JOBS_TABLE": self.jobs_table,
            "CTXSTORE_BLOB_BUCKET": self.bucket,
        }


def create_all(names: AwsNames) -> None:
    ddb = boto3.client("dynamodb", region_name=REGION)
    create_table_from_template(ddb, "RecordsTable", names.records_table)
    create_table_from_template(ddb, "JobsTable", names.jobs_table)
    create_bucket_from_template(boto3.client("s3", region_name=REGION), names.bucket)


class MotoWorld:
    """One moto mock per folder: reopening the same folder finds the same (in-process) AWS state.

    moto's state is process-global; a mock started with reset=True wipes it. The first open of a
    folder resets and creates the resources, a reopen (after close) starts the mock without reset, so
    a close/reopen within one test sees the data it wrote, like reopening a SQLite file.
    """

    _lock = threading.Lock()
    _seen: set[Path] = set()

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.names = AwsNames()
        self._saved_env: dict[str, str | None] = {}
        self._mock: Any = None

    def open(self) -> Callable[[], None]:
        with self._lock:
            fresh = self.folder not in self._seen
            self._seen.add(self.folder)
        self._saved_env = {k: os.environ.get(k) for k in _FAKE_ENV}
        os.environ.update(_FAKE_ENV)
        self._mock = mock_aws()
        self._mock.start(reset=fresh)
        if fresh:
            try:
                create_all(self.names)
            except BaseException:
                self.close()
                raise
        return self.close

    def close(self) -> None:
        if self._mock is not None:
            self._mock.stop(remove_data=False)
            self._mock = None
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def entry_name(app_py: Path) -> str:
    """The name a function's app.py hands to the composition root (`handler = handler_for("<name>")`)."""
    import ast

    for node in ast.walk(ast.parse(app_py.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "handler_for":
            arg = node.args[0]
            assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), app_py
            return arg.value
    raise AssertionError(f"{app_py} does not call handler_for")
