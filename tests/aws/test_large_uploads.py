"""Large uploads on AWS: a presigned S3 POST bounded by its policy, then POST /context/ingest by reference.

moto accepts POSTs to the presigned URL in-process (`requests` is intercepted), but it does not
enforce a POST policy's conditions nor apply its `tagging` field; those are checked on the policy
document S3 itself evaluates. The ingest Lambda then reads the staged object from S3 — the request it
receives is a few hundred bytes, whatever the file's size.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import boto3
import requests
import urllib3

from ctxstore.adapters.aws.s3_blobs import STAGED_TAG, S3BlobStore
from ctxstore.domain.ingest_request import MAX_FILE_BYTES
from tests.aws import sfn_harness as h
from tests.aws.moto_env import REGION, MotoWorld
from tests.aws.test_api_functions import _ready_database
from tests.aws.test_handlers import FakeContext, aws, event, load_function, new_key  # noqa: F401 (aws: fixture)

LAMBDA_PAYLOAD_CAP = 6 * 1024 * 1024


def _policy(fields: dict[str, str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(base64.b64decode(fields["policy"]))
    return doc


def test_presigned_post_policy_pins_key_size_encryption_and_staging_tag(aws: MotoWorld) -> None:  # noqa: F811
    blobs = S3BlobStore(aws.names.bucket)
    before = time.time()
    grant = blobs.presigned_post(
        "o1", "_uploads/u1", expires_in=900, max_bytes=MAX_FILE_BYTES, content_type="application/pdf"
    )
    assert grant.url.startswith("https://") and aws.names.bucket in grant.url and grant.file_field == "file"
    assert grant.fields["key"] == "o1/_uploads/u1"
    policy = _policy(grant.fields)
    conds = policy["conditions"]
    assert ["content-length-range", 1, MAX_FILE_BYTES] in conds
    assert {"key": "o1/_uploads/u1"} in conds and {"bucket": aws.names.bucket} in conds
    assert {"x-amz-server-side-encryption": "AES256"} in conds
    assert {"Content-Type": "application/pdf"} in conds
    tagging = next(c["tagging"] for c in conds if isinstance(c, dict) and "tagging" in c)
    assert f"<Key>{STAGED_TAG[0]}</Key><Value>{STAGED_TAG[1]}</Value>" in tagging
    assert grant.fields["tagging"] == tagging
    expires = time.mktime(time.strptime(policy["expiration"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before + 890 <= expires <= time.time() + 910
    # every field the client sends is covered by a condition (S3 refuses unlisted fields)
    signed = {"policy", "x-amz-signature"}
    named = {k for c in conds if isinstance(c, dict) for k in c} | {"key"}
    assert set(grant.fields) - signed <= named


def test_a_7mb_file_is_ingested_by_reference_without_passing_through_the_lambda(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: Any,
) -> None:
    arn = h.create_state_machine()  # started, not executed here (the state-machine test executes one)
    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", arn)
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")
    api = load_function("api_context_ingest")

    ev = event("api_context_ingest_uploads", key)
    ev["body"] = json.dumps({"filename": "big.md", "size_bytes": 7 * 1024 * 1024, "content_type": "text/markdown"})
    resp = api.handler(ev, FakeContext())
    assert resp["statusCode"] == 201, resp
    grant = json.loads(resp["body"])["data"]
    assert grant["max_bytes"] == MAX_FILE_BYTES and grant["method"] == "POST"

    doc = b"# Big\n\n" + b"The lighthouse keeper logs every passing ship. " * (7 * 1024 * 1024 // 47 + 1)
    assert len(doc) > LAMBDA_PAYLOAD_CAP
    up = requests.post(grant["url"], data=grant["fields"], files={grant["file_field"]: ("big.md", doc)}, timeout=30)
    assert up.status_code == 204, up.text

    body, ctype = urllib3.encode_multipart_formdata(
        [
            ("database", "acme"),
            ("document_metadata", json.dumps([{"id": "big-1"}])),
            ("uploads", json.dumps([{"upload_id": grant["upload_id"]}])),
        ]
    )
    ev = event("api_context_ingest", key)
    ev["headers"]["content-type"] = ctype
    ev["body"] = base64.b64encode(body).decode()
    assert len(ev["body"]) < 2048  # the Lambda sees a reference, not the file
    resp = api.handler(ev, FakeContext())
    assert resp["statusCode"] == 202, resp
    [result] = json.loads(resp["body"])["data"]["results"]
    assert (result["id"], result["filename"], result["status"]) == ("big-1", "big.md", "queued")

    s3 = boto3.client("s3", region_name=REGION)
    objects = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket=aws.names.bucket, Prefix="acme-org/")["Contents"]}
    item_keys = [k for k, size in objects.items() if "/big-1/" in k and size == len(doc)]
    assert len(item_keys) == 1, objects  # the item's own copy, where Parse reads it
    assert not [k for k in objects if "/_uploads/" in k], "the staged object is released after the accept"
    sfn = boto3.client("stepfunctions", region_name=REGION)
    [execution] = sfn.list_executions(stateMachineArn=arn)["executions"]
    started = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert started["payload"]["ref"]["id"] == "big-1"


def test_ingest_refuses_a_staged_object_over_50mb(aws: MotoWorld, monkeypatch: Any) -> None:  # noqa: F811
    """S3's policy refuses these already; the ingest check holds even if an object got there another way."""
    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", h.create_state_machine())
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")
    api = load_function("api_context_ingest")
    grant = json.loads(api.handler(event("api_context_ingest_uploads", key), FakeContext())["body"])["data"]
    boto3.client("s3", region_name=REGION).put_object(
        Bucket=aws.names.bucket, Key=grant["fields"]["key"], Body=b"x" * (MAX_FILE_BYTES + 1)
    )
    body, ctype = urllib3.encode_multipart_formdata(
        [("database", "acme"), ("uploads", json.dumps([{"upload_id": grant["upload_id"]}]))]
    )
    ev = event("api_context_ingest", key)
    ev["headers"]["content-type"] = ctype
    ev["body"] = base64.b64encode(body).decode()
    resp = api.handler(ev, FakeContext())
    assert resp["statusCode"] == 413, resp
    assert json.loads(resp["body"])["error"]["code"] == "PAYLOAD_TOO_LARGE"
