"""The console's Lambda (functions/console_web) under moto: sign-in over HTTPS, pages, and a file over the
Lambda request limit uploaded by reference (grant, presigned POST to S3, ingest) through the console."""

from __future__ import annotations

import copy
import json
import re
from typing import Any
from urllib.parse import urlencode

import boto3
import requests

from tests.aws import sfn_harness as h
from tests.aws.moto_env import REGION, MotoWorld
from tests.aws.test_api_functions import _ready_database
from tests.aws.test_handlers import FakeContext, aws, event, load_function, new_key  # noqa: F401 (aws: fixture)

LAMBDA_PAYLOAD_CAP = 6 * 1024 * 1024


def _request(
    base: dict[str, Any],
    method: str,
    path: str,
    cookies: list[str],
    body: str = "",
    *,
    json_body: str = "",
    csrf: str | None = None,
) -> dict[str, Any]:
    ev = copy.deepcopy(base)
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    ev["routeKey"] = ev["requestContext"]["routeKey"] = f"{method} /console/{{proxy+}}"
    ev["cookies"] = cookies
    if body or json_body:
        ev["body"] = body or json_body
        ev["headers"]["content-type"] = "application/json" if json_body else "application/x-www-form-urlencoded"
    if csrf is not None:
        ev["headers"]["x-csrf-token"] = csrf
    return ev


def _cookie(resp: dict[str, Any], name: str) -> str:
    found = next(c for c in resp.get("cookies", []) if c.startswith(name + "="))
    return str(found)


def _sign_in(fn: Any, base: dict[str, Any], key: str) -> tuple[dict[str, Any], str]:
    """The sign-in page, then the signed-in POST; returns the sign-in answer and the session cookie."""
    page = fn.handler(base, FakeContext())
    assert page["statusCode"] == 200, page
    assert "Sign in" in page["body"] and page["headers"]["content-security-policy"].startswith("default-src 'self'")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page["body"])
    assert token
    signin_cookie = _cookie(page, "ctxstore_console_signin").split(";")[0]
    form = urlencode({"api_key": key, "csrf_token": token.group(1)})
    resp = fn.handler(_request(base, "POST", "/console/sign-in", [signin_cookie], form), FakeContext())
    assert resp["statusCode"] == 303, resp
    return resp, _cookie(resp, "ctxstore_console")


def test_console_function_signs_in_over_https_and_serves_pages(aws: MotoWorld) -> None:  # noqa: F811
    key = new_key("acme-org")
    fn = load_function("console_web")
    base = event("console_web")
    _, session = _sign_in(fn, base, key)
    assert "Secure" in session and "HttpOnly" in session and "SameSite=strict" in session  # API Gateway is TLS
    keys = fn.handler(_request(base, "GET", "/console/keys", [session.split(";")[0]]), FakeContext())
    assert keys["statusCode"] == 200, keys
    assert key.split("_")[1] in keys["body"] and key not in keys["body"]
    connectors = fn.handler(_request(base, "GET", "/console/connectors", [session.split(";")[0]]), FakeContext())
    assert connectors["statusCode"] == 200 and "No connectors yet" in connectors["body"], connectors


def test_a_file_over_the_lambda_limit_goes_to_s3_by_reference(aws: MotoWorld, monkeypatch: Any) -> None:  # noqa: F811
    arn = h.create_state_machine()  # started, not executed here (the state-machine test executes one)
    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", arn)
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")
    fn = load_function("console_web")
    base = event("console_web")
    _, session = _sign_in(fn, base, key)
    cookies = [session.split(";")[0]]
    page = fn.handler(_request(base, "GET", "/console/databases/acme/items", cookies), FakeContext())
    assert page["statusCode"] == 200, page
    assert 'data-inline-max-bytes="4194304"' in page["body"]  # 4 MiB on AWS: base64 of it fits Lambda's 6 MB
    csrf = re.search(r'"X-CSRF-Token": "([^"]+)"', page["body"])
    assert csrf
    token = csrf.group(1)

    ask = json.dumps({"filename": "big.md", "size_bytes": 7 * 1024 * 1024, "content_type": "text/markdown"})
    grants = "/console/databases/acme/uploads"
    resp = fn.handler(_request(base, "POST", grants, cookies, json_body=ask, csrf=token), FakeContext())
    assert resp["statusCode"] == 201, resp
    grant = json.loads(resp["body"])
    assert grant["url"].startswith("https://") and aws.names.bucket in grant["url"]
    # The page may send the file there: its CSP names S3's origin (and nothing else beyond its own).
    origin = "/".join(grant["url"].split("/")[:3])
    assert f"connect-src 'self' {origin};" in page["headers"]["content-security-policy"]

    doc = b"# Big\n\n" + b"The lighthouse keeper logs every passing ship. " * (7 * 1024 * 1024 // 47 + 1)
    assert len(doc) > LAMBDA_PAYLOAD_CAP
    up = requests.post(grant["url"], data=grant["fields"], files={grant["file_field"]: ("big.md", doc)}, timeout=30)
    assert up.status_code == 204, up.text

    ref = json.dumps({"upload_id": grant["upload_id"], "filename": "big.md", "collection": ""})
    ev = _request(base, "POST", "/console/databases/acme/upload-ref", cookies, json_body=ref, csrf=token)
    assert len(ev["body"]) < 512  # the console's Lambda sees a reference, not the file
    resp = fn.handler(ev, FakeContext())
    assert resp["statusCode"] == 202, resp
    answer = json.loads(resp["body"])
    assert (answer["filename"], answer["status"]) == ("big.md", "queued")
    s3 = boto3.client("s3", region_name=REGION)
    objects = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket=aws.names.bucket, Prefix="acme-org/")["Contents"]}
    assert [k for k, size in objects.items() if f"/{answer['id']}/" in k and size == len(doc)], objects
    assert not [k for k in objects if "/_uploads/" in k], "the staged object is released after the accept"
    sfn = boto3.client("stepfunctions", region_name=REGION)
    assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 1
    # Without the session's CSRF token, no grant.
    stolen = _request(base, "POST", grants, cookies, json_body=ask)
    assert fn.handler(stolen, FakeContext())["statusCode"] == 403
