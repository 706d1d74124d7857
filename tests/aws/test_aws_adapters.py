"""AWS adapter behaviour beyond the port contract suites: Step Functions starts, presigned URLs, dead letters."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from ctxstore.adapters.aws.dynamodb_queue import DynamoDbWorkQueue
from ctxstore.adapters.aws.s3_blobs import S3BlobStore
from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter, execution_name
from ctxstore.ports.blobs import BlobNotFound
from tests.aws.moto_env import REGION, MotoWorld

_SFN_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[MotoWorld]:
    w = MotoWorld(tmp_path)
    close = w.open()
    yield w
    close()


def _state_machine() -> str:
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn: str = sfn.create_state_machine(name="ingest", definition=json.dumps(definition), roleArn=role)[
        "stateMachineArn"
    ]
    return arn


@pytest.mark.parametrize(
    "name",
    ["item-1", "db/col/item 1", "x" * 300, "ünïcødé/?#%*[]", "", "a_b", "a/b"],
)
def test_execution_names_are_valid_and_deterministic(name: str) -> None:
    n = execution_name("org-1", name)
    assert _SFN_NAME.match(n), n
    assert n == execution_name("org-1", name)
    assert n != execution_name("org-2", name)


def test_execution_names_do_not_collide_after_sanitising() -> None:
    assert execution_name("o", "a/b") != execution_name("o", "a_b")
    assert execution_name("o", "x" * 100 + "1") != execution_name("o", "x" * 100 + "2")


def test_start_once_per_name_and_org(world: MotoWorld) -> None:
    arn = _state_machine()
    wf = SfnWorkflowStarter(arn)
    assert wf.start("org1", "db/col/item-1", {"item": "item-1"}) is True
    assert wf.start("org1", "db/col/item-1", {"item": "item-1"}) is False  # a retried request
    assert wf.start("org2", "db/col/item-1", {"item": "item-1"}) is True  # another org's item
    sfn = boto3.client("stepfunctions", region_name=REGION)
    execs = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert sorted(e["name"] for e in execs) == sorted(
        [execution_name("org1", "db/col/item-1"), execution_name("org2", "db/col/item-1")]
    )
    started = sfn.describe_execution(executionArn=execs[0]["executionArn"])
    body = json.loads(started["input"])
    assert body["payload"] == {"item": "item-1"} and body["org"] in {"org1", "org2"}


def test_presigned_get_url(world: MotoWorld) -> None:
    blobs = S3BlobStore(world.names.bucket)
    blobs.put("o1", "db/c/item/original", b"hello", content_type="text/plain")
    url = blobs.presigned_get_url("o1", "db/c/item/original", expires_in=60)
    parsed = urllib.parse.urlparse(url)
    assert parsed.scheme == "https" and parsed.path.endswith("/o1/db/c/item/original")
    query = urllib.parse.parse_qs(parsed.query)
    assert query["X-Amz-Expires"] == ["60"] and "X-Amz-Signature" in query
    with pytest.raises(BlobNotFound):
        blobs.presigned_get_url("o2", "db/c/item/original")


def test_blobs_are_encrypted_at_rest(world: MotoWorld) -> None:
    S3BlobStore(world.names.bucket).put("o1", "k", b"x")
    head = boto3.client("s3", region_name=REGION).head_object(Bucket=world.names.bucket, Key="o1/k")
    assert head["ServerSideEncryption"] == "AES256"


def test_dead_letters_are_listed_with_their_error(world: MotoWorld) -> None:
    q = DynamoDbWorkQueue(world.names.jobs_table)
    q.enqueue("o", "q", "j1", {})
    [job] = q.claim("q", lease_s=30)
    q.fail(job, error="E6001: gave up")
    assert q.dead("q") == [("j1", "E6001: gave up")]
    assert q.pending("q") == 0


def test_presigned_url_sets_download_name_and_type(world: MotoWorld) -> None:
    blobs = S3BlobStore(world.names.bucket)
    blobs.put("o1", "db/c/item/original", b"%PDF-1.7")
    url = blobs.presigned_url(
        "o1", "db/c/item/original", expires_in=120, filename="rép ort.pdf", content_type="application/pdf"
    )
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    assert query["response-content-type"] == ["application/pdf"]
    assert query["response-content-disposition"] == ["attachment; filename*=UTF-8''r%C3%A9p%20ort.pdf"]
    assert query["X-Amz-Expires"] == ["120"]


def test_scope_purges_query_the_scopes_index_instead_of_scanning(
    world: MotoWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore
    from ctxstore.ports.records import Put

    store = DynamoDbRecordStore(world.names.records_table)
    sep = "\x1f"
    scoped = [(f"db{sep}c1{sep}knowledge", "a"), (f"db{sep}c1{sep}memory", "b"), (f"db{sep}c2{sep}knowledge", "c"),
              (f"db10{sep}c1{sep}knowledge", "d")]  # fmt: skip
    for pk, sk in scoped:
        store.put("o", Put("item", pk, sk, {"x": 1}))
    store.put("o", Put("graph_payload", f"db{sep}c1{sep}knowledge", "a", {}))
    store.put("o2", Put("item", f"db{sep}c1{sep}knowledge", "e", {}))
    store.put("o", Put("database", "", "db", {}))  # unscoped records carry no GSI key
    raw = boto3.client("dynamodb", region_name=REGION).scan(TableName=world.names.records_table)["Items"]
    assert {i["pk"]["S"]: i.get("pg", {}).get("S") for i in raw}["o#database#"] is None
    assert {i["pk"]["S"]: i["pg"]["S"] for i in raw if "pg" in i}[f"o#item#db{sep}c1{sep}knowledge"] == "o#item#db"

    def no_scan(**_: object) -> None:
        raise AssertionError("a scope purge must not scan the table")

    monkeypatch.setattr(store._ddb, "scan", no_scan)
    assert store.delete_partitions("o", "item", f"db{sep}c1{sep}") == 2  # one collection
    assert store.count("o", "item", f"db{sep}c2{sep}knowledge") == 1
    assert store.delete_partitions("o", "item", f"db{sep}") == 1  # the rest of the database, not db10
    assert store.count("o", "item", f"db10{sep}c1{sep}knowledge") == 1
    assert store.count("o2", "item", f"db{sep}c1{sep}knowledge") == 1
    assert store.count("o", "graph_payload", f"db{sep}c1{sep}knowledge") == 1  # another kind: its own purge
    assert store.get("o", "database", "", "db") is not None


def test_batch_reads_ask_again_for_the_keys_dynamodb_left_unprocessed(
    world: MotoWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BatchGetItem may answer part of a call and return the rest as UnprocessedKeys (throttling, 16 MB):
    the store asks again for those, and never sends more than 100 keys or a key twice in one call."""
    from ctxstore.adapters.aws import dynamodb_records
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore
    from ctxstore.ports.records import Put

    monkeypatch.setattr(dynamodb_records.time, "sleep", lambda _s: None)
    store = DynamoDbRecordStore(world.names.records_table)
    for i in range(150):
        store.put("o", Put("item", "db", f"i{i}", {"n": i}))
    real = store._ddb.batch_get_item
    calls: list[int] = []

    def half_unprocessed(**kwargs: Any) -> Any:
        ((table, request),) = kwargs["RequestItems"].items()
        keys = request["Keys"]
        assert len(keys) <= 100 and len({json.dumps(k, sort_keys=True) for k in keys}) == len(keys)
        assert request["ConsistentRead"] is True
        calls.append(len(keys))
        served, left = keys[: (len(keys) + 1) // 2], keys[(len(keys) + 1) // 2 :]
        resp = real(RequestItems={table: {**request, "Keys": served}})
        if left:
            resp["UnprocessedKeys"] = {table: {**request, "Keys": left}}
        return resp

    monkeypatch.setattr(store._ddb, "batch_get_item", half_unprocessed)
    keys = [("db", f"i{i}") for i in range(150)] + [("db", "i3")]
    got = store.get_many("o", "item", keys)
    assert {sk: r.data["n"] for (_, sk), r in got.items()} == {f"i{i}": i for i in range(150)}
    assert calls[0] == 100 and len(calls) > 2
