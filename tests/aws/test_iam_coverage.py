"""Least privilege, proven: every AWS action each function performs is allowed by its role, and no role
holds a write its function never makes.

Every function of template.yaml (the list comes from the template, so a function added there is covered)
runs its handler, imported as Lambda imports it and configured with the environment the template gives it,
through representative flows under moto: the API functions with their events/ samples and the flows behind
them (a database created and provisioned by the job worker, an upload executed through the ingestion state
machine to `completed` and a poison item to MarkErrored, item reads and edits, queries with graph context,
graph reads, BYOG, webhook registration and SQS dispatch with a retried delivery, uploads by reference,
the console, connectors synced by connector_sync, a database purged). tests/aws/iam_recorder.py records
each call's IAM action and resource ARN per function (botocore hooks; the OpenSearch Serverless requests
from the fake collection's transport; Neptune Analytics and Bedrock runtime answered by responders at
the botocore boundary, since moto emulates neither). tests/aws/iam_policy.py evaluates them against the
roles SAM's translator makes of the template and against the collection's data access policy.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import numpy as np
import pytest
import requests

from tests.aws import sfn_harness as h
from tests.aws.fake_opensearch import FakeCollection, RecordingAdapter, connection_class
from tests.aws.iam_policy import Deployment, aoss_allows, deployment, is_write
from tests.aws.iam_policy import action_matches as _action_matches
from tests.aws.iam_policy import resource_matches as _resource_matches
from tests.aws.iam_recorder import RECORDER, aoss_permissions, iam_actions, neptune_query_actions
from tests.aws.moto_env import REGION, ROOT, AwsNames, MotoWorld
from tests.aws.moto_env import resource as template_resource
from tests.aws.test_handlers import FakeContext, load_function

PARAMETERS = {
    "NamePrefix": "ctxstore",
    "Stage": "test",
    "GraphStore": "neptune-analytics",
}  # the graph on: its grants too
COLLECTION_ID = "iamtest0collection"
GRAPH_ID = "g-iamtest001"
ORG = "acme-org"
POISON = "poison-1"  # an item whose chunk writes the collection always refuses (503): it ends in MarkErrored

# Writes a role holds that no flow here makes, each with the reason it stays. Keys: (function folder, action
# pattern as written in the template, or a data access policy permission). Every other write a role may make,
# its function makes in these flows.
_CONSOLE = (
    "the console's pages run the same services as the API functions (database create/delete, item deletes, graph "
    "edits, connectors), whose calls this test proves; its flow here covers sign-in, pages and uploads"
)
ALLOWED_UNUSED_WRITES: dict[tuple[str, str], str] = {
    ("ingest_index", "aoss:CreateIndex"): "writing chunks creates the shared index when it is missing (a collection "
    "an operator recreated); in these flows the job worker created it when the database was provisioned",
    ("connector_sync", "scheduler:CreateSchedule"): "re-anchoring updates the connector's schedule and creates it when "
    "it is missing (deleted outside ctxstore); the flows' schedule exists",
    ("connector_sync", "scheduler:DeleteSchedule"): "a connector whose syncs stop (no next_sync_at) has its schedule "
    "cancelled by the sync that stops it; the flows' connector keeps syncing",
    ("api_byog", "dynamodb:DeleteItem"): "BYOG databases exist only where an operator mapped a graph of their own "
    "(CTXSTORE_BYOG_GRAPH_IDS, not in the template); deleting one deletes its records. Unmapped, BYOG answers 403",
    ("ingest_complete", "aoss:WriteDocument"): "Complete bulk-deletes stray copies of a chunk (a retried bulk's "
    "duplicate, pipeline/search_visibility.py); these flows leave none",
    ("ingest_starter", "sqs:ChangeMessageVisibility"): "messages are made visible again when every one of "
    "IngestMaxRunning's slots is taken; the flows start fewer executions than that",
    ("console_web", "aoss:WriteDocument"): _CONSOLE,
    ("console_web", "dynamodb:BatchWriteItem"): _CONSOLE,
    ("console_web", "dynamodb:PutItem"): _CONSOLE,
    ("console_web", "iam:PassRole"): _CONSOLE,
    ("console_web", "neptune-graph:WriteDataViaQuery"): _CONSOLE,
    ("console_web", "neptune-graph:DeleteDataViaQuery"): _CONSOLE,
    ("console_web", "scheduler:CreateSchedule"): _CONSOLE,
    ("console_web", "scheduler:UpdateSchedule"): _CONSOLE,
    ("console_web", "scheduler:DeleteSchedule"): _CONSOLE,
}


# ---- the stack under moto ---------------------------------------------------------------------------
def _embedding(body: dict[str, Any]) -> tuple[int, bytes]:
    """Bedrock Titan v2's documented answer: a unit vector of the asked dimensions from the text's words."""
    dims = int(body.get("dimensions", 1024))
    vec = np.zeros(dims, dtype=np.float64)
    for word in re.findall(r"\w+", str(body.get("inputText", "")).lower()):
        vec[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dims] += 1.0
    vec = vec / (np.linalg.norm(vec) or 1.0)
    text = str(body.get("inputText", ""))
    return 200, json.dumps({"embedding": vec.tolist(), "inputTextTokenCount": len(text.split())}).encode()


class NeptuneAnswers:
    """ExecuteQuery answered in Neptune's documented openCypher JSON. Only the adapter's graph registry is
    kept (a `ctxstore_graph` node per namespace: MERGE registers, list_graphs reads, drop deletes it), so
    listing and dropping graphs run their real queries; every other query answers no rows."""

    def __init__(self) -> None:
        self.registry: dict[str, dict[str, str]] = {}

    def __call__(self, body: dict[str, Any]) -> tuple[int, bytes]:
        query, params = body.get("query", ""), body.get("parameters") or {}  # the wire names
        rows: list[dict[str, Any]] = []
        if "ctxstore_graph" in query:
            if "MERGE" in query:
                self.registry[params["ns"]] = {"org": params["org"], "name": params["name"]}
            elif "DELETE" in query:
                rows = [{"n": int(self.registry.pop(params["ns"], None) is not None)}]
            elif "RETURN" in query:
                rows = [
                    {"name": g["name"]}
                    for g in self.registry.values()
                    if g["org"] == params.get("org") and g["name"].startswith(params.get("prefix", ""))
                ]
        return 200, json.dumps({"results": rows}).encode()


class AossTransport(RecordingAdapter):
    """The fake collection's transport, recording each request's data access permissions for the running
    function, and refusing (503) chunk writes of the poison item."""

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        raw = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
        path = urllib.parse.urlparse(request.url or "").path
        if path.endswith("/_bulk"):
            body: Any = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            body = json.loads(raw) if raw.strip() else None
        RECORDER.record_aoss(request.url or "", request.method or "", body)
        if path.endswith("/_bulk") and f'"item_id": "{POISON}"' in raw.replace('":"', '": "'):
            resp = requests.Response()
            resp.status_code = 503
            resp._content = b'{"error": "unavailable"}'
            resp.request = request
            resp.url = request.url or ""
            return resp
        return super().send(request, **kwargs)


class Receiver:
    """A webhook endpoint on 127.0.0.1 answering the given statuses in order, then 200."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses, self.received = list(statuses), 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.received += 1
                self.send_response(receiver.statuses.pop(0) if receiver.statuses else 200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()


@dataclass
class Stack:
    """One deployment of template.yaml under moto, named as the template names its resources."""

    folder: Path
    mp: pytest.MonkeyPatch
    execute: bool = False  # run executions on moto's Step Functions interpreter (tasks via the harness)
    extra_env: dict[str, str] = field(default_factory=dict)
    invoked: set[str] = field(default_factory=set)
    modules: dict[str, ModuleType] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.saved_environ = dict(os.environ)  # restored whole at close: handlers run on moto's threads too
        self.dep = deployment(PARAMETERS, {"SearchCollection": COLLECTION_ID, "Graph": GRAPH_ID})
        self.world = MotoWorld(self.folder)
        self.world.names = AwsNames(
            self.dep.name("RecordsTable"), self.dep.name("JobsTable"), self.dep.name("BlobBucket")
        )
        self.close_world = self.world.open()
        res = self.dep.resources
        sqs = boto3.client("sqs", region_name=REGION)
        for lid, r in res.items():
            if r["Type"] == "AWS::SQS::Queue":
                vis = r["Properties"].get("VisibilityTimeout")
                if isinstance(vis, int):
                    sqs.create_queue(QueueName=self.dep.name(lid), Attributes={"VisibilityTimeout": str(vis)})
                else:
                    sqs.create_queue(QueueName=self.dep.name(lid))
        kms = boto3.client("kms", region_name=REGION)
        key = kms.create_key(Description="connector credentials")["KeyMetadata"]
        self.dep.overrides.update({"ConnectorCredentialsKey": key["KeyId"], "ConnectorCredentialsKey.Arn": key["Arn"]})
        boto3.client("scheduler", region_name=REGION).create_schedule_group(Name=self.dep.name("ConnectorSchedules"))
        if self.execute:  # moto keeps executing state machines in another backend: set before creating it
            from moto.core.config import default_user_config

            self.mp.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="ingest-sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        boto3.client("stepfunctions", region_name=REGION).create_state_machine(
            name=self.dep.name("IngestStateMachine"), definition=h.definition(), roleArn=role
        )
        RECORDER.responders[("neptune-graph", "ExecuteQuery")] = NeptuneAnswers()
        RECORDER.responders[("bedrock-runtime", "InvokeModel")] = _embedding
        RECORDER.aoss_collections[COLLECTION_ID] = self.dep.name("SearchCollection")
        import ctxstore.adapters.aws.opensearch_index as opensearch_index

        self.aoss = AossTransport(FakeCollection())
        self.mp.setattr(opensearch_index, "RequestsHttpConnection", connection_class(self.aoss))
        for k, v in {
            "POWERTOOLS_TRACE_DISABLED": "1",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "CTXSTORE_ALLOW_PRIVATE_WEBHOOKS": "true",  # the receiver listens on 127.0.0.1
        }.items():
            self.mp.setenv(k, v)

    def close(self) -> None:
        self.close_world()
        os.environ.clear()
        os.environ.update(self.saved_environ)

    # -- running functions ------------------------------------------------------------------------------
    def env(self, folder: str) -> Callable[[], None]:
        """Sets the environment the template gives `folder`'s function (plus the test's extras); returns undo."""
        wanted = {**self.dep.environment(self.dep.functions()[folder]), **self.extra_env}
        wanted["POWERTOOLS_LOG_LEVEL"] = "WARNING"
        saved = {k: os.environ.get(k) for k in wanted}
        os.environ.update(wanted)

        def undo() -> None:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        return undo

    def load(self, folder: str) -> ModuleType:
        if folder not in self.modules:
            undo = self.env(folder)
            try:
                with RECORDER.running(folder):  # what a cold start calls is the function's too
                    self.modules[folder] = load_function(folder)
            finally:
                undo()
        return self.modules[folder]

    def handler(self, folder: str) -> Callable[[Any, Any], Any]:
        module = self.load(folder)

        def run(event: Any, context: Any) -> Any:
            self.invoked.add(folder)
            undo = self.env(folder)
            try:
                return RECORDER.invoke(folder, module.handler, event, context)
            finally:
                undo()

        return run

    def call(self, folder: str, event: dict[str, Any], context: Any = None) -> Any:
        return self.handler(folder)(event, context or FakeContext(function_name=folder))

    def http(self, folder: str, method: str, path: str, body: Any = None, query: str = "", **kw: Any) -> dict[str, Any]:
        """An API request to `folder`'s function with that function's own key."""
        resp: dict[str, Any] = self.call(folder, http_event(method, path, self.key_for(folder), body, query, **kw))
        return resp

    def key_for(self, folder: str) -> str:
        """One key per function: its first request is the key's first use, so authentication writes the key's
        `last_used_at` from that function, as any function may do for a key first seen in a minute."""
        if folder not in self.keys:
            self.keys[folder] = self.new_key()
        return self.keys[folder]

    def setup_services(self) -> Any:
        """The services as an operator's script would build them (not recorded: no function is running)."""
        from ctxstore.config import Settings
        from ctxstore.runtime.aws import build_aws
        from ctxstore.services.registry import build_services

        undo = self.env("api_databases")
        try:
            return build_services(build_aws(Settings()))
        finally:
            undo()

    def new_key(self) -> str:
        key: str = self.setup_services().keys.create(ORG)
        return key

    def execute_ingestions(self, monkeypatch: pytest.MonkeyPatch) -> h.LambdaRouter:
        """moto runs started executions; each task invokes its function's handler here (tests/aws/sfn_harness.py)."""
        assert self.execute, "create the stack with execute=True"
        tasks = {lid: self.handler(h.code_dir(lid)) for lid in _state_machine_functions(self.dep)}
        return h.LambdaRouter(monkeypatch, tasks)

    def queue_url(self, logical_id: str) -> str:
        return str(self.dep.ref(logical_id))


def http_event(
    method: str,
    path: str,
    key: str | None,
    body: Any = None,
    query: str = "",
    *,
    content_type: str = "application/json",
    raw_body: bytes | None = None,
    cookies: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    ev: dict[str, Any] = json.loads((ROOT / "events" / "api_query.json").read_text())
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    ev["routeKey"] = ev["requestContext"]["routeKey"] = f"{method} {path}"
    ev["rawQueryString"] = query
    if query:
        ev["queryStringParameters"] = dict(urllib.parse.parse_qsl(query))
    ev["headers"]["content-type"] = content_type
    if key is None:
        del ev["headers"]["authorization"]
    else:
        ev["headers"]["authorization"] = f"Bearer {key}"
    ev["headers"].update(headers or {})
    if cookies:
        ev["cookies"] = cookies
    if raw_body is not None:
        ev["body"], ev["isBase64Encoded"] = base64.b64encode(raw_body).decode(), True
    elif body is None:
        ev.pop("body", None)
    else:
        ev["body"] = body if isinstance(body, str) else json.dumps(body)
    return ev


def _ok(resp: dict[str, Any], *statuses: int) -> dict[str, Any]:
    assert resp["statusCode"] in (statuses or (200, 201, 202)), resp
    return resp


def _json(resp: dict[str, Any]) -> Any:
    return json.loads(resp["body"])


# ---- the flows ----------------------------------------------------------------------------------------
def _multipart(fields: dict[str, str], files: list[tuple[str, bytes, str]]) -> tuple[bytes, str]:
    import urllib3

    parts: list[tuple[str, Any]] = list(fields.items())
    parts += [("documents", (name, data, ctype)) for name, data, ctype in files]
    body, ctype = urllib3.encode_multipart_formdata(parts)
    return body, ctype


def _sqs_trigger(stack: Stack, folder: str, queue_lid: str) -> dict[str, Any]:
    """One poll of Lambda's SQS event source mapping: receive, invoke, delete what was not reported."""
    sqs = boto3.client("sqs", region_name=REGION)
    url = stack.queue_url(queue_lid)
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages", [])
    records = [
        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
         "attributes": m["Attributes"], "eventSource": "aws:sqs",
         "eventSourceARN": stack.dep.getatt(queue_lid, "Arn"), "awsRegion": REGION}
        for m in msgs
    ]  # fmt: skip
    result: dict[str, Any] = stack.call(folder, {"Records": records})
    failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
    for m in msgs:
        if m["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return {"received": len(msgs), "failed": failed}


def _start_ingestions(stack: Stack) -> None:
    """The bounded starter run as its event source mapping would until the start queue is empty (the API,
    console and connector functions only queue starts)."""
    while _sqs_trigger(stack, "ingest_starter", "IngestStartQueue")["received"]:
        pass


def _stream_event(stack: Stack) -> dict[str, Any]:
    """The jobs table's stream record of an insert (the sample's shape), as the job worker's trigger sends it."""
    ev: dict[str, Any] = json.loads((ROOT / "events" / "job_worker_stream.json").read_text())
    return ev


def flow_main(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Health; a database created and provisioned; a webhook; an upload executed to completed (and a poison
    item to MarkErrored) on the state machine; reads, edits, queries, graphs, BYOG; webhook dispatch with a
    retried delivery; the item and then the database deleted and purged by the worker."""
    _ok(stack.call("api_health", json.loads((ROOT / "events" / "api_health.json").read_text())), 200)
    _ok(stack.http("api_databases", "POST", "/databases", {"database": "acme"}), 202)
    assert stack.call("job_worker", _stream_event(stack), FakeContext(remaining_ms=300_000)) == {"ran": 1}
    assert stack.call("job_worker", json.loads((ROOT / "events" / "job_worker_schedule.json").read_text()))
    _ok(stack.http("api_databases", "GET", "/databases/status", query="database=acme"), 200)
    _ok(stack.http("api_databases", "GET", "/databases"), 200)
    _ok(stack.http("api_databases", "POST", "/databases", {"database": "acme"}), 409)
    _ok(stack.http("api_databases", "GET", "/databases/stats", query="database=acme"), 200)
    _ok(stack.http("api_databases", "GET", "/databases/collections", query="database=acme"), 200)

    receiver = Receiver([503])  # the first delivery fails once: dispatch sets its visibility for the retry
    try:
        _ok(stack.http("api_webhooks", "POST", "/webhooks/indexing", {"url": receiver.url}), 201)
        _ok(stack.http("api_webhooks", "GET", "/webhooks/indexing"), 200)
        _ok(stack.http("api_webhooks", "GET", "/webhooks/indexing/deliveries"), 200)

        router = stack.execute_ingestions(monkeypatch)
        from tests.api.test_relations import PAYLOAD, TEXT

        doc = ("# Keeper's guide\n\n" + "The lighthouse keeper logs every passing ship. " * 40).encode()
        app = [
            {"id": "d1", "title": "Ada", "type": "note", "content": {"text": TEXT}},
            {"id": POISON, "title": "Poison", "type": "note", "content": {"text": "This one never indexes."}},
        ]
        raw, ctype = _multipart(
            {
                "database": "acme",
                "document_metadata": json.dumps([{"id": "guide-1"}]),
                "app_knowledge": json.dumps(app),
                "graph_payload": json.dumps({"d1": PAYLOAD}),
            },
            [("guide.md", doc, "text/markdown")],
        )
        _ok(stack.http("api_context_ingest", "POST", "/context/ingest", raw_body=raw, content_type=ctype), 202)
        arn = str(stack.dep.ref("IngestStateMachine"))
        _start_ingestions(stack)
        execs = h.wait_for_executions(arn, 3, timeout_s=150, router=router)
        by_item = {json.loads(e["input"])["payload"]["ref"]["id"]: e["status"] for e in execs}
        assert by_item == {"guide-1": "SUCCEEDED", "d1": "SUCCEEDED", POISON: "FAILED"}, by_item
        status = _json(
            _ok(
                stack.http(
                    "api_context_ingest", "GET", "/context/status", query=f"database=acme&ids=guide-1,d1,{POISON}"
                )
            )
        )
        states = {s["id"]: s["indexing_status"] for s in status["data"]["statuses"]}
        assert states == {"guide-1": "completed", "d1": "completed", POISON: "errored"}, states

        # Deliveries of those status changes: the first POST fails and is retried after its backoff.
        first = _sqs_trigger(stack, "webhook_dispatch", "WebhookQueue")
        assert first["received"] and len(first["failed"]) == 1, first
        # The failed delivery retried by hand (queued again: a message from the API function).
        listed = _json(_ok(stack.http("api_webhooks", "GET", "/webhooks/indexing/deliveries"), 200))
        [failed] = [d for d in listed.get("data", listed)["deliveries"] if d["status"] == "failed"]
        retry = f"/webhooks/indexing/deliveries/{failed['delivery_id']}/retry"
        _ok(stack.http("api_webhooks", "POST", retry), 200, 202)
        for _ in range(5):
            if not _sqs_trigger(stack, "webhook_dispatch", "WebhookQueue")["received"]:
                break
        assert receiver.received > first["received"]
        _ok(stack.http("api_webhooks", "POST", "/webhooks/indexing/test"), 200, 201, 202)
        _sqs_trigger(stack, "webhook_dispatch", "WebhookQueue")
        _ok(stack.http("api_webhooks", "DELETE", "/webhooks/indexing"), 200, 204)
    finally:
        receiver.close()

    q = "database=acme&id=guide-1"
    _ok(stack.http("api_context_items", "POST", "/context/list", {"database": "acme"}), 200)
    _ok(stack.http("api_context_items", "GET", "/context/inspect", query=q), 200)
    _ok(stack.http("api_context_items", "GET", "/context/chunks", query=q), 200)
    meta = {"database": "acme", "collection": "", "additional_metadata": {"shelf": "b"}}
    _ok(stack.http("api_context_items", "PATCH", "/context/guide-1/metadata", meta), 200)

    ask = {"database": "acme", "query": "lighthouse keeper", "max_results": 5}
    _ok(stack.http("api_query", "POST", "/query", ask), 200)
    _ok(stack.http("api_query", "POST", "/query", {**ask, "graph_context": True}), 200)
    said = {"request_id": "9d13aef4-02f4-4e73-8c62-4c2601d04f9d", "feedback": "found it", "database": "acme"}
    _ok(stack.http("api_query", "POST", "/feedback", said), 201)
    _ok(stack.http("api_graphs", "GET", "/context/relations", query="database=acme&id=d1"), 200)
    _ok(stack.http("api_graphs", "GET", "/context/subgraph", query="database=acme&id=d1"), 200, 404)
    _ok(stack.http("api_graphs", "GET", "/context/d1/subgraph", query="database=acme"), 200, 404)

    byog = {"database": "graphs"}  # refused on AWS unless an operator mapped it to a graph of its own (docs/aws.md)
    _ok(stack.http("api_byog", "POST", "/byog/databases", byog), 200, 201, 202, 403)
    cypher = {"database": "graphs", "collection": "people", "query": "MATCH (n) RETURN n LIMIT 1"}
    _ok(stack.http("api_byog", "POST", "/byog/query", cypher), 200, 403, 404, 503)
    _ok(stack.http("api_byog", "GET", "/byog/collections", query="database=graphs"), 200, 403, 404)
    _ok(stack.http("api_byog", "DELETE", "/byog/databases", byog), 200, 202, 403, 404)

    _ok(stack.http("api_context_items", "DELETE", "/context", {"database": "acme", "ids": ["guide-1"]}), 200)
    _ok(stack.http("api_databases", "DELETE", "/databases", query="database=acme"), 200, 202)
    for _ in range(3):  # the purge and its follow-ups run on the worker
        stack.call("job_worker", _stream_event(stack), FakeContext(remaining_ms=300_000))


def _state_machine_functions(dep: Deployment) -> list[str]:
    """The functions the ingestion state machine's tasks invoke (its DefinitionSubstitutions)."""
    subs = template_resource("IngestStateMachine")["Properties"]["DefinitionSubstitutions"]
    return [v["GetAtt"].split(".")[0] for v in subs.values() if isinstance(v, dict) and "GetAtt" in v]


def _webhook(stack: Stack, svc: Any) -> None:
    """A webhook of the org, so that status changes emit deliveries onto the queue (nothing delivers them here)."""
    from ctxstore.services.access.principal import Principal

    key = stack.new_key()
    svc.webhooks.register(Principal(ORG, key.split("_")[1]), "http://127.0.0.1:9/hook", None, None, False)


def flow_uploads_and_console(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file sent by reference (grant, presigned POST, ingest), and the console's pages and upload path."""
    svc = stack.setup_services()
    from ctxstore.services.access.principal import Principal

    _webhook(stack, svc)
    svc.databases.create(Principal(ORG, "test"), "acme", None, "database_metadata_schema")
    svc.databases.provision(ORG, "acme")
    ask = {"filename": "big.md", "size_bytes": 2048, "content_type": "text/markdown"}
    grant = _json(_ok(stack.http("api_context_ingest", "POST", "/context/uploads", ask), 201))["data"]
    doc = b"# Big\n\n" + b"The lighthouse keeper logs every passing ship. " * 40
    up = requests.post(grant["url"], data=grant["fields"], files={grant["file_field"]: ("big.md", doc)}, timeout=30)
    assert up.status_code == 204, up.text
    raw, ctype = _multipart(
        {
            "database": "acme",
            "document_metadata": json.dumps([{"id": "big-1"}]),
            "uploads": json.dumps([{"upload_id": grant["upload_id"]}]),
        },
        [],
    )
    _ok(stack.http("api_context_ingest", "POST", "/context/ingest", raw_body=raw, content_type=ctype), 202)

    from tests.aws.test_console_function import _cookie

    base = json.loads((ROOT / "events" / "console_web.json").read_text())
    console = stack.handler("console_web")
    page = console(base, FakeContext())
    token = re.search(r'name="csrf_token" value="([^"]+)"', page["body"])
    assert token, page
    signin = _cookie(page, "ctxstore_console_signin").split(";")[0]
    form = urllib.parse.urlencode({"api_key": stack.key_for("console_web"), "csrf_token": token.group(1)})
    ev = http_event("POST", "/console/sign-in", None, form, content_type="application/x-www-form-urlencoded")
    ev["cookies"] = [signin]
    resp = _ok(console(ev, FakeContext()), 303)
    cookies = [_cookie(resp, "ctxstore_console").split(";")[0]]
    for path in ("/console/keys", "/console/connectors", "/console/databases", "/console/databases/acme/items"):
        _ok(console(http_event("GET", path, None, cookies=cookies), FakeContext()), 200)
    items = console(http_event("GET", "/console/databases/acme/items", None, cookies=cookies), FakeContext())
    csrf = re.search(r'"X-CSRF-Token": "([^"]+)"', items["body"])
    assert csrf
    hdr = {"x-csrf-token": csrf.group(1)}
    ask = {"filename": "big.md", "size_bytes": len(doc), "content_type": "text/markdown"}
    ev = http_event("POST", "/console/databases/acme/uploads", None, ask, cookies=cookies, headers=hdr)
    grant = json.loads(_ok(console(ev, FakeContext()), 201)["body"])
    up = requests.post(grant["url"], data=grant["fields"], files={grant["file_field"]: ("big.md", doc)}, timeout=30)
    assert up.status_code == 204, up.text
    ref = {"upload_id": grant["upload_id"], "filename": "big.md", "collection": ""}
    ev = http_event("POST", "/console/databases/acme/upload-ref", None, ref, cookies=cookies, headers=hdr)
    _ok(console(ev, FakeContext()), 202)


def flow_connectors(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Slack connector created, configured and synced by connector_sync (queued, then by its schedule),
    then deleted; the fake Slack API stands in for Slack."""
    from tests.fakes.slack_api import FakeSlack

    slack = FakeSlack().start()
    try:
        stack.extra_env.update(
            CTXSTORE_CONNECTOR_BASE_URL_SLACK=slack.base_url, CTXSTORE_CONNECTOR_TOKEN_URL_SLACK=slack.base_url
        )
        token = "xoxb-aws-secret-token"
        slack.add_token(token)
        slack.add_channel("C0123456789", "general")
        first = slack.post("C0123456789", "Alice deployed the billing service", at=time.time() - 86400)
        key = stack.key_for("api_connectors")
        svc = stack.setup_services()
        from ctxstore.services.access.principal import Principal

        _webhook(stack, svc)
        svc.databases.create(Principal(ORG, "test"), "acme", None, "database_metadata_schema")
        svc.databases.provision(ORG, "acme")
        create = json.loads((ROOT / "events" / "api_connectors_create.json").read_text())
        create["headers"]["authorization"] = f"Bearer {key}"
        create["body"] = create["body"].replace("xoxb-replace-with-a-bot-token", token)
        cid = _json(_ok(stack.call("api_connectors", create), 201))["data"]["connector_id"]
        configure = json.loads((ROOT / "events" / "api_connectors_configure.json").read_text())
        configure["headers"]["authorization"] = f"Bearer {key}"
        configure["rawPath"] = configure["requestContext"]["http"]["path"] = f"/connectors/{cid}/configure"
        _ok(stack.call("api_connectors", configure), 200)
        router = stack.execute_ingestions(monkeypatch)
        out = stack.call("connector_sync", {"Records": []}, FakeContext(remaining_ms=900_000))
        assert out == {"queued": 0, "ran": 1}, out
        _start_ingestions(stack)
        h.wait_for_executions(str(stack.dep.ref("IngestStateMachine")), 1, timeout_s=150, router=router)
        slack.post("C0123456789", "Carol: a new message")
        fired = json.loads((ROOT / "events" / "connector_sync.json").read_text())
        fired["schedule"].update(schedule_id=cid, org=ORG, payload={"connector_id": cid})
        stack.call("connector_sync", fired, FakeContext(remaining_ms=900_000))
        slack.delete("C0123456789", first)  # deleted at the provider: the next sync deletes the item here
        stack.call("connector_sync", fired, FakeContext(remaining_ms=900_000))
        _ok(stack.http("api_connectors", "GET", f"/connectors/{cid}"), 200)
        _ok(stack.http("api_connectors", "DELETE", f"/connectors/{cid}"), 200)
    finally:
        slack.stop()


FLOWS = (flow_main, flow_uploads_and_console, flow_connectors)


@dataclass
class Run:
    """Per flow: its deployment (each world has its own KMS key) and the calls recorded per function."""

    flows: list[tuple[Deployment, dict[str, set[tuple[str, str]]]]]
    invoked: set[str]

    @property
    def dep(self) -> Deployment:
        return self.flows[0][0]

    def calls(self, folder: str) -> set[tuple[str, str]]:
        return {c for _, calls in self.flows for c in calls.get(folder, set())}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    RECORDER.reset()
    result = Run([], set())
    for flow in FLOWS:
        with pytest.MonkeyPatch.context() as mp:
            stack = Stack(tmp_path_factory.mktemp(flow.__name__), mp, execute=flow in (flow_main, flow_connectors))
            try:
                flow(stack, mp)
            finally:
                stack.close()
            result.invoked |= stack.invoked
            result.flows.append((stack.dep, RECORDER.by_function()))
            RECORDER.reset()
    yield result


# ---- the checks -------------------------------------------------------------------------------------------
@pytest.mark.timeout(600)
def test_every_function_of_the_template_ran(run: Run) -> None:
    functions = set(run.dep.functions())
    assert functions - run.invoked == set(), "add a flow for these functions"
    # Each function with policies of its own made AWS calls: none slipped past the recorder's hooks.
    for folder, lid in run.dep.functions().items():
        if any(s.own for s in run.dep.role(lid).statements):
            assert run.calls(folder), f"{folder}: no AWS call recorded"


def _denied(run: Run) -> list[str]:
    out: set[str] = set()
    for dep, calls_by_function in run.flows:
        policies = dep.data_access_policies()
        for folder, calls in calls_by_function.items():
            role = dep.role(dep.functions()[folder])
            for action, resource in calls:
                if action.startswith("aoss:") and action != "aoss:APIAccessAll":
                    ok = aoss_allows(policies, role.arn, action, resource)
                else:
                    ok = role.allows(action, resource)
                if not ok:
                    out.add(f"{folder}: {action} on {resource}")
    return sorted(out)


def test_every_call_each_function_makes_is_allowed_by_its_role(run: Run) -> None:
    denied = _denied(run)
    assert denied == [], "\n".join(denied)


def _unused_writes(run: Run) -> list[str]:
    """Writes held (by policy and action, or data access permission) that no flow's call matched."""
    held: dict[tuple[str, str, str], str] = {}
    used: set[tuple[str, str, str]] = set()
    for dep, calls_by_function in run.flows:
        policies = dep.data_access_policies()
        for folder, lid in dep.functions().items():
            calls = calls_by_function.get(folder, set())
            role = dep.role(lid)
            for action, resources, source in role.writes():
                grant = (folder, action, source)
                held[grant] = f"{folder}: {action} on {', '.join(resources)} ({source})"
                if any(
                    _action_matches(action, a) and any(_resource_matches(r, x) for r in resources) for a, x in calls
                ):
                    used.add(grant)
            for permission, resource in {(p, r) for policy in policies for p, r in policy.grants(role.arn)}:
                if is_write(permission):
                    grant = (folder, permission, "data access policy")
                    held[grant] = f"{folder}: {permission} on {resource} (data access policy)"
                    if any(_action_matches(permission, a) and _resource_matches(resource, x) for a, x in calls):
                        used.add(grant)
    allowed = set(ALLOWED_UNUSED_WRITES)
    return sorted(text for grant, text in held.items() if grant not in used and grant[:2] not in allowed)


def test_no_role_holds_a_write_its_function_never_makes(run: Run) -> None:
    unused = _unused_writes(run)
    assert unused == [], "allowed but never made (remove the grant, or allow-list it with the reason):\n" + "\n".join(
        unused
    )


def test_the_allow_list_names_real_unused_grants(run: Run) -> None:
    """An allow-list entry for a grant that no longer exists, or that a flow now exercises, is stale."""
    for (folder, action), reason in ALLOWED_UNUSED_WRITES.items():
        assert reason
        role = run.dep.role(run.dep.functions()[folder])
        policies = run.dep.data_access_policies()
        held = [a for a, _, _ in role.writes()] + [p for pol in policies for p, _ in pol.grants(role.arn)]
        assert action in held, f"{folder}: {action} is not granted any more"
        assert not any(_action_matches(action, a) for a, _ in run.calls(folder)), f"{folder}: {action} is now made"


# ---- the recorder's and checker's own rules ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "actions"),
    [
        ("MATCH (s:Source {sid: $sid}) RETURN s", {"Read"}),
        ("UNWIND $rows AS e MERGE (n:Entity {eid: e.eid}) ON CREATE SET n.name = e.name", {"Read", "Write"}),
        ("MATCH (s:Source {sid: $sid}) OPTIONAL MATCH (s)-[l]->() DELETE l", {"Read", "Delete"}),
        ("MATCH (n:X) WITH n LIMIT 10000 DETACH DELETE n RETURN count(*) AS c", {"Read", "Delete"}),
        ("MATCH (n:X) REMOVE n.ghost", {"Read", "Delete"}),
        ("MATCH (n:`CREATE`) WHERE n.t = 'SET x DELETE' RETURN n", {"Read"}),  # names and literals are not clauses
        ("CREATE (a:A)-[:R]->(b:B)", {"Read", "Write"}),
    ],
)
def test_neptune_query_actions_follow_the_clauses(query: str, actions: set[str]) -> None:
    assert {
        a.removeprefix("neptune-graph:").removesuffix("DataViaQuery") for a in neptune_query_actions(query)
    } == actions


def test_aoss_permissions_of_requests() -> None:
    assert aoss_permissions("HEAD", "/chunks", None) == [("aoss:DescribeIndex", "chunks")]
    assert aoss_permissions("PUT", "/chunks", {}) == [("aoss:CreateIndex", "chunks")]
    assert aoss_permissions("DELETE", "/chunks", None) == [("aoss:DeleteIndex", "chunks")]
    assert aoss_permissions("POST", "/chunks/_search", {}) == [("aoss:ReadDocument", "chunks")]
    bulk = [{"index": {"_index": "chunks"}}, {"text": "x"}, {"delete": {"_index": "chunks", "_id": "1"}}]
    assert aoss_permissions("POST", "/_bulk", bulk) == [("aoss:WriteDocument", "chunks")] * 2


def test_iam_names_differ_from_operations_where_iam_says_so() -> None:
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/t"
    tx = {"TransactItems": [{"Put": {"TableName": "t"}}, {"Update": {"TableName": "t"}}]}
    assert iam_actions("dynamodb", "TransactWriteItems", tx) == [
        ("dynamodb:PutItem", table),
        ("dynamodb:UpdateItem", table),
    ]
    assert iam_actions("dynamodb", "Query", {"TableName": "t", "IndexName": "due"}) == [
        ("dynamodb:Query", table + "/index/due")
    ]
    assert iam_actions("s3", "HeadObject", {"Bucket": "b", "Key": "k"}) == [("s3:GetObject", "arn:aws:s3:::b/k")]
    assert iam_actions("s3", "ListObjectsV2", {"Bucket": "b"}) == [("s3:ListBucket", "arn:aws:s3:::b")]
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
    q = "arn:aws:sqs:us-east-1:123456789012:q"
    assert iam_actions("sqs", "ChangeMessageVisibilityBatch", {"QueueUrl": url}) == [("sqs:ChangeMessageVisibility", q)]
    sched = {"Name": "n", "GroupName": "g", "Target": {"RoleArn": "arn:aws:iam::123456789012:role/r"}}
    assert ("iam:PassRole", "arn:aws:iam::123456789012:role/r") in iam_actions("scheduler", "CreateSchedule", sched)


def test_role_evaluation_wildcards_and_explicit_deny() -> None:
    from tests.aws.iam_policy import Role, Statement

    role = Role(
        "F",
        "arn:aws:iam::123456789012:role/F",
        [
            Statement("Allow", ("sqs:SendMessage*",), ("arn:aws:sqs:*:*:q",), "p0", True),
            Statement("Allow", ("s3:*Object",), ("arn:aws:s3:::b/*",), "p1", True),
            Statement("Deny", ("s3:DeleteObject",), ("arn:aws:s3:::b/keep/*",), "p2", True),
        ],
    )
    assert role.allows("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q")
    assert not role.allows("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q2")
    assert role.allows("s3:getobject", "arn:aws:s3:::b/x")  # action names are case-insensitive
    assert role.allows("s3:DeleteObject", "arn:aws:s3:::b/x")
    assert not role.allows("s3:DeleteObject", "arn:aws:s3:::b/keep/x")
    assert not role.allows("s3:ListBucket", "arn:aws:s3:::b")


def test_the_translated_template_resolves_every_function_role() -> None:
    dep = deployment(PARAMETERS, {"SearchCollection": COLLECTION_ID, "Graph": GRAPH_ID, "ConnectorCredentialsKey": "k"})
    for lid in dep.functions().values():
        role = dep.role(lid)
        assert role.arn.endswith(f":role/{lid}Role")
        for s in role.statements:
            assert all(isinstance(r, str) and "${" not in r for r in s.resources), (lid, s)
