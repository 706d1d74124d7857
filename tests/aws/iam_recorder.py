"""Records the IAM actions each Lambda function performs, from botocore's event hooks.

Every botocore client created in this process (by a test or inside the code under test, whatever
session it comes from) gets three hooks, installed by wrapping `botocore.session.Session.create_client`
when this module is imported:

* `before-parameter-build`: keeps the call's API parameters for the next hook, and records presigned
  URLs (no request is sent, but the URL acts with the signer's permissions);
* `before-call`: records the IAM action(s) and resource ARN(s) the call needs;
* `before-send`: answers services moto does not emulate (Neptune Analytics, Bedrock runtime) from
  responders a test registers, so their calls run through the real client and are recorded too.

A call is attributed to the function whose handler is running (`Recorder.invoke` / `Recorder.wrap`
set a context variable; `ThreadPoolExecutor.submit` carries it into the pool threads a handler uses,
as one Lambda invocation owns its process). Calls made outside a handler (test setup) are not recorded.

IAM names: the service's signing name + ':' + the operation, except where IAM names the permission
differently (HeadObject needs s3:GetObject, SendMessageBatch sqs:SendMessage, TransactWriteItems the
item actions, ExecuteQuery neptune-graph:Read/Write/DeleteDataViaQuery by its clauses, ...).
OpenSearch Serverless data-plane requests are recorded by `record_aoss` (called from the fake
collection's transport): `aoss:APIAccessAll` on the collection plus the data access policy's permission.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import botocore.session
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.signers import S3PostPresigner

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account

_function: contextvars.ContextVar[str | None] = contextvars.ContextVar("iam_recorder_function", default=None)


@dataclass(frozen=True)
class Call:
    function: str  # the function's code folder (functions/<name>)
    action: str  # IAM action, e.g. dynamodb:UpdateItem
    resource: str  # ARN, or "*" for actions without a resource type
    operation: str  # what was called, e.g. dynamodb.TransactWriteItems, aoss POST /_bulk


# A responder answers one (botocore service id, operation), e.g. ("neptune-graph", "ExecuteQuery"),
# with (HTTP status, body bytes).
Responder = Callable[[dict[str, Any]], tuple[int, bytes]]


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)
    responders: dict[tuple[str, str], Responder] = field(default_factory=dict)
    aoss_collections: dict[str, str] = field(default_factory=dict)  # endpoint host id -> collection name
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def running(self, function: str) -> Iterator[None]:
        token = _function.set(function)
        try:
            yield
        finally:
            _function.reset(token)

    def wrap(self, function: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """The handler, attributing what it calls to `function` (for callers such as the Step Functions harness)."""

        def run(event: Any, context: Any) -> Any:
            with self.running(function):
                return handler(event, context)

        return run

    def invoke(self, function: str, handler: Callable[..., Any], event: Any, context: Any) -> Any:
        return self.wrap(function, handler)(event, context)

    def record(self, action: str, resource: str, operation: str) -> None:
        function = _function.get()
        if function is None:
            return
        with self._lock:
            self.calls.append(Call(function, action, resource, operation))

    def by_function(self) -> dict[str, set[tuple[str, str]]]:
        out: dict[str, set[tuple[str, str]]] = {}
        for c in self.calls:
            out.setdefault(c.function, set()).add((c.action, c.resource))
        return out

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
        self.responders.clear()
        self.aoss_collections.clear()

    # -- OpenSearch Serverless ----------------------------------------------------------------------
    def record_aoss(self, url: str, method: str, body: Any) -> None:
        """One data-plane request to a collection endpoint (https://<id>.<region>.aoss.amazonaws.com/...)."""
        parsed = urlparse(url)
        collection_id = (parsed.hostname or "").split(".")[0]
        name = self.aoss_collections.get(collection_id, collection_id)
        op = f"aoss {method} {parsed.path}"
        self.record("aoss:APIAccessAll", f"arn:aws:aoss:{REGION}:{ACCOUNT}:collection/{collection_id}", op)
        for permission, index in aoss_permissions(method, parsed.path, body):
            self.record(permission, f"index/{name}/{index}", op)


RECORDER = Recorder()


# ---- action and resource names ---------------------------------------------------------------------
def _ddb_table(name: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def _s3(bucket: str, key: str | None = None) -> str:
    return f"arn:aws:s3:::{bucket}" + ("" if key is None else f"/{key}")


def _dynamodb(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    if op == "TransactWriteItems":
        kinds = {
            "Put": "PutItem",
            "Update": "UpdateItem",
            "Delete": "DeleteItem",
            "ConditionCheck": "ConditionCheckItem",
        }
        return [
            (f"dynamodb:{kinds[kind]}", _ddb_table(spec["TableName"]))
            for item in p.get("TransactItems", [])
            for kind, spec in item.items()
        ]
    if op == "TransactGetItems":
        return [("dynamodb:GetItem", _ddb_table(i["Get"]["TableName"])) for i in p.get("TransactItems", [])]
    if op in ("BatchWriteItem", "BatchGetItem"):
        return [(f"dynamodb:{op}", _ddb_table(t)) for t in p.get("RequestItems", {})]
    table = _ddb_table(p.get("TableName", "*"))
    if p.get("IndexName"):
        table += f"/index/{p['IndexName']}"
    return [(f"dynamodb:{op}", table)]


_S3_ACTION = {
    "HeadObject": "GetObject",
    "ListObjectsV2": "ListBucket",
    "ListObjects": "ListBucket",
    "HeadBucket": "ListBucket",
    "ListObjectVersions": "ListBucketVersions",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "ListMultipartUploads": "ListBucketMultipartUploads",
    "ListParts": "ListMultipartUploadParts",
}


def _s3_actions(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    bucket = p.get("Bucket", "*")
    if op == "DeleteObjects":
        return [("s3:DeleteObject", _s3(bucket, o["Key"])) for o in p.get("Delete", {}).get("Objects", [])]
    if op == "CopyObject":
        src = p["CopySource"]
        if isinstance(src, dict):
            src_arn = _s3(src["Bucket"], src["Key"])
        else:
            sb, _, sk = unquote(src).lstrip("/").partition("/")
            src_arn = _s3(sb, sk.split("?versionId=")[0])
        return [("s3:GetObject", src_arn), ("s3:PutObject", _s3(bucket, p["Key"]))]
    action = _S3_ACTION.get(op, op)
    out = [(f"s3:{action}", _s3(bucket, p.get("Key")))]
    if op in ("PutObject", "CreateMultipartUpload", "CopyObject") and p.get("Tagging"):
        out.append(("s3:PutObjectTagging", _s3(bucket, p["Key"])))
    return out


def _sqs(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    op = op.removesuffix("Batch")
    url = p.get("QueueUrl")
    name = urlparse(url).path.rstrip("/").rsplit("/", 1)[-1] if url else p.get("QueueName", "*")
    return [(f"sqs:{op}", f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}")]


def _states(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    arn = p.get("executionArn") or p.get("stateMachineArn") or "*"
    return [(f"states:{op}", arn)]


def _kms(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    key = p.get("KeyId", "*")
    if not key.startswith("arn:") and key != "*":
        key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key}"
    return [(f"kms:{op}", key)]


def _scheduler(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    if "Name" not in p:  # ListSchedules, ListScheduleGroups: no resource type
        return [(f"scheduler:{op}", "*")]
    group = p.get("GroupName") or "default"
    out = [(f"scheduler:{op}", f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/{group}/{p['Name']}")]
    role = (p.get("Target") or {}).get("RoleArn")
    if role:  # the schedule runs as that role: creating or updating it passes the role
        out.append(("iam:PassRole", role))
    return out


def _bedrock(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    def model_arn(model: str) -> str:
        return model if model.startswith("arn:") else f"arn:aws:bedrock:{REGION}::foundation-model/{model}"

    if op in ("InvokeModel", "InvokeModelWithResponseStream", "Converse", "ConverseStream"):
        action = (
            "InvokeModelWithResponseStream"
            if op in ("ConverseStream", "InvokeModelWithResponseStream")
            else "InvokeModel"
        )
        return [(f"bedrock:{action}", model_arn(p["modelId"]))]
    if op == "Rerank":  # no resource type; the model itself needs InvokeModel
        model = p["rerankingConfiguration"]["bedrockRerankingConfiguration"]["modelConfiguration"]["modelArn"]
        return [("bedrock:Rerank", "*"), ("bedrock:InvokeModel", model_arn(model))]
    return [(f"bedrock:{op}", "*")]


# openCypher clauses that change data; Neptune checks what a query *might* do, so a clause anywhere counts.
_WRITE_CLAUSE = re.compile(r"\b(CREATE|MERGE|SET)\b", re.IGNORECASE)
_DELETE_CLAUSE = re.compile(r"\b(DELETE|REMOVE)\b", re.IGNORECASE)
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`")


def neptune_query_actions(query: str) -> list[str]:
    """The neptune-graph actions ExecuteQuery needs for this openCypher text (AWS: every query reads; a
    query that creates, merges or sets needs WriteDataViaQuery, one that deletes or removes DeleteDataViaQuery)."""
    code = _STRING.sub("''", query)  # a keyword inside a literal or a `quoted name` is not a clause
    actions = ["neptune-graph:ReadDataViaQuery"]
    if _WRITE_CLAUSE.search(code):
        actions.append("neptune-graph:WriteDataViaQuery")
    if _DELETE_CLAUSE.search(code):
        actions.append("neptune-graph:DeleteDataViaQuery")
    return actions


def _neptune(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    graph = p.get("graphIdentifier", "*")
    arn = graph if graph.startswith("arn:") else f"arn:aws:neptune-graph:{REGION}:{ACCOUNT}:graph/{graph}"
    if op == "ExecuteQuery":
        return [(a, arn) for a in neptune_query_actions(p.get("queryString", ""))]
    return [(f"neptune-graph:{op}", arn)]


_BY_SERVICE: dict[str, Callable[[str, dict[str, Any]], list[tuple[str, str]]]] = {
    "dynamodb": _dynamodb,
    "s3": _s3_actions,
    "sqs": _sqs,
    "states": _states,
    "kms": _kms,
    "scheduler": _scheduler,
    "bedrock": _bedrock,
    "neptune-graph": _neptune,
}

_NO_PERMISSION = {("sts", "GetCallerIdentity")}  # answered for any caller


def iam_actions(signing_name: str, operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    if (signing_name, operation) in _NO_PERMISSION:
        return []
    mapper = _BY_SERVICE.get(signing_name)
    if mapper is None:
        return [(f"{signing_name}:{operation}", "*")]
    return mapper(operation, params)


def aoss_permissions(method: str, path: str, body: Any) -> list[tuple[str, str]]:
    """(data access permission, index name) pairs an OpenSearch request needs on a serverless collection."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return []
    if parts[0] in ("_bulk", "_msearch", "_mget") or (len(parts) > 1 and parts[1] in ("_bulk", "_msearch", "_mget")):
        endpoint = parts[0] if parts[0].startswith("_") else parts[1]
        default_index = None if parts[0].startswith("_") else parts[0]
        if endpoint == "_bulk":
            lines = body if isinstance(body, list) else []
            out = []
            for line in lines:
                if isinstance(line, dict) and len(line) == 1:
                    ((op, meta),) = line.items()
                    if op in ("index", "create", "update", "delete") and isinstance(meta, dict):
                        out.append(("aoss:WriteDocument", meta.get("_index") or default_index or "*"))
            return out
        return [("aoss:ReadDocument", default_index or "*")]
    index = parts[0]
    if len(parts) == 1:
        return [
            (
                {"HEAD": "aoss:DescribeIndex", "GET": "aoss:DescribeIndex", "PUT": "aoss:CreateIndex"}.get(
                    method, "aoss:DeleteIndex" if method == "DELETE" else "aoss:UpdateIndex"
                ),
                index,
            )
        ]
    op = parts[1]
    if op in ("_search", "_count", "_mget", "_msearch", "_explain"):
        return [("aoss:ReadDocument", index)]
    if op == "_delete_by_query" or op == "_update_by_query":
        return [("aoss:ReadDocument", index), ("aoss:WriteDocument", index)]
    if op in ("_doc", "_create", "_update"):
        return [("aoss:ReadDocument" if method in ("GET", "HEAD") else "aoss:WriteDocument", index)]
    if op in ("_mapping", "_mappings", "_settings", "_alias", "_aliases"):
        return [("aoss:DescribeIndex" if method in ("GET", "HEAD") else "aoss:UpdateIndex", index)]
    return [("aoss:UnknownRequest", index)]


# ---- the botocore hooks ----------------------------------------------------------------------------
_PARAMS_KEY = "iam_recorder_params"


def _on_params(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    context[_PARAMS_KEY] = dict(params)
    # A presigned URL performs its operation with the signer's permissions when it is used.
    if context.get("is_presign_request") and model.name != "CreateBucket":  # CreateBucket = a presigned POST
        for action, resource in iam_actions(model.service_model.signing_name, model.name, params):
            RECORDER.record(action, resource, f"presigned {model.service_model.service_name}.{model.name}")


def _on_call(model: Any, context: dict[str, Any], **_: Any) -> None:
    params = context.get(_PARAMS_KEY, {})
    service = model.service_model.signing_name
    for action, resource in iam_actions(service, model.name, params):
        RECORDER.record(action, resource, f"{model.service_model.service_name}.{model.name}")


def _respond(request: Any, event_name: str = "", **kwargs: Any) -> AWSResponse | None:
    """Answers a call to a service moto does not emulate when a test registered a responder for it."""
    _, service_id, operation = event_name.split(".", 2)
    responder = RECORDER.responders.get((service_id, operation))
    if responder is None:
        return None
    raw = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
    status, payload = responder(json.loads(raw) if raw.strip().startswith("{") else {})
    headers = HTTPHeaders()
    headers["content-type"] = "application/json"
    return AWSResponse(request.url, status, headers, _Raw(payload))


class _Raw(io.BytesIO):
    """The urllib3-response shape botocore reads a body from: `stream()` for parsed bodies, `read()` for blobs."""

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self.getvalue()


def _presigned_post(original: Callable[..., Any]) -> Callable[..., Any]:
    def generate(
        self: S3PostPresigner, request_dict: dict[str, Any], fields: Any = None, conditions: Any = None, **kw: Any
    ) -> Any:
        url = urlparse(request_dict.get("url", ""))
        host = url.hostname or ""
        virtual = re.match(r"(.+?)\.s3[.-]", host)
        bucket = virtual.group(1) if virtual else url.path.strip("/").split("/")[0]
        key = (fields or {}).get("key", "*")
        RECORDER.record("s3:PutObject", _s3(bucket, key), "presigned s3 POST")
        if (fields or {}).get("tagging"):
            RECORDER.record("s3:PutObjectTagging", _s3(bucket, key), "presigned s3 POST")
        return original(self, request_dict, fields=fields, conditions=conditions, **kw)

    return generate


def _carry_context(original: Callable[..., Any]) -> Callable[..., Any]:
    def submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if _function.get() is None:
            return original(self, fn, *args, **kwargs)
        ctx = contextvars.copy_context()
        return original(self, ctx.run, fn, *args, **kwargs)

    return submit


def _install() -> None:
    if getattr(botocore.session.Session, "_iam_recorder", False):
        return
    create = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
        client = create(self, *args, **kwargs)
        client.meta.events.register("before-parameter-build", _on_params)
        client.meta.events.register("before-call", _on_call)
        client.meta.events.register_first("before-send", _respond)  # type: ignore[arg-type]  # a response ends the chain
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    botocore.session.Session._iam_recorder = True  # type: ignore[attr-defined]
    S3PostPresigner.generate_presigned_post = _presigned_post(S3PostPresigner.generate_presigned_post)  # type: ignore[method-assign]
    ThreadPoolExecutor.submit = _carry_context(ThreadPoolExecutor.submit)  # type: ignore[method-assign]


_install()
