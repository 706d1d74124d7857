"""statemachines/ingest.asl.json: its shape, its retry policy, its tasks' functions, and real executions under moto.

The executions start where production starts them: POST /context/ingest through the API function
(the upload goes to S3, the item record to DynamoDB, the execution to Step Functions), and every task
runs the real ingest_<step> handler in this process (tests/aws/sfn_harness.py). Chunks go to the real
SQLite search index and vectors come from the real local embedding model, standing in for OpenSearch
Serverless and Bedrock, which moto does not emulate.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import urllib3

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.pipeline.ingest_steps import IngestSteps
from ctxstore.pipeline.jobs import INGEST_RETRY
from tests.aws import sfn_harness as h
from tests.aws.moto_env import REGION, ROOT, MotoWorld, entry_name, template
from tests.aws.test_handlers import FakeContext, aws, event, load_function, new_key  # noqa: F401 (aws: fixture)

TASK_FUNCTIONS = (
    "IngestParseFunction",
    "IngestEmbedFunction",
    "IngestIndexFunction",
    "IngestGraphFunction",
    "IngestCompleteFunction",
    "IngestErroredFunction",
)


def _asl() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(h.ASL.read_text())
    return data


def _tasks(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        if state["Type"] == "Task":
            yield name, state
        elif state["Type"] == "Map":
            yield from _tasks(state["ItemProcessor"]["States"])


# ---- the definition -----------------------------------------------------------------------------
def test_every_task_retries_transient_errors_with_the_local_runners_policy() -> None:
    tasks = dict(_tasks(_asl()["States"]))
    assert len(tasks) == 6
    for name, state in tasks.items():
        [retry] = state["Retry"]
        assert "TransientError" in retry["ErrorEquals"], name
        # RetryPolicy.max_attempts counts attempts; ASL MaxAttempts counts retries after the first.
        assert retry["MaxAttempts"] == INGEST_RETRY.max_attempts - 1, name
        assert retry["IntervalSeconds"] == INGEST_RETRY.interval_s, name
        assert retry["BackoffRate"] == INGEST_RETRY.backoff_rate, name
        assert retry["MaxDelaySeconds"] == INGEST_RETRY.max_delay_s, name
        assert retry["JitterStrategy"] == ("FULL" if INGEST_RETRY.jitter else "NONE"), name


def test_every_step_is_caught_into_the_errored_step() -> None:
    states = _asl()["States"]
    for name, state in states.items():
        if state["Type"] in ("Task", "Map") and name != "MarkErrored":
            assert state["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "MarkErrored"}]
    assert states["MarkErrored"]["Next"] == "Errored" and states["Errored"]["Type"] == "Fail"
    order = ["Parse", "ParsedOrStopped", "Embed", "Index", "IndexedOrStopped", "Graph", "Complete", "Completed"]
    nxt = {n: s.get("Next") or s.get("Default") for n, s in states.items()}
    assert [order[0], *[nxt[n] for n in order[:-1]]] == order
    assert states["Embed"]["Type"] == "Map" and states["Embed"]["ItemsPath"] == "$.parsed.batches"


def test_every_task_maps_to_a_template_function_whose_handler_calls_a_pipeline_step() -> None:
    res = template()["Resources"]
    machine = res["IngestStateMachine"]["Properties"]
    assert machine["DefinitionUri"] == "statemachines/ingest.asl.json"
    subs = machine["DefinitionSubstitutions"]
    step_methods = {n for n in vars(IngestSteps) if not n.startswith("_")}
    policies = [p for p in machine["Policies"] if "LambdaInvokePolicy" in p]
    invokable = {p["LambdaInvokePolicy"]["FunctionName"]["Ref"] for p in policies}
    for name, state in _tasks(_asl()["States"]):
        sub = state["Resource"].removeprefix("${").removesuffix("}")
        logical_id = subs[sub]["GetAtt"].split(".")[0]
        assert res[logical_id]["Type"] == "AWS::Serverless::Function", name
        assert logical_id in invokable, f"{name}: the state machine may not invoke {logical_id}"
        app_py = ROOT / res[logical_id]["Properties"]["CodeUri"] / "app.py"
        name = entry_name(app_py)
        assert name == app_py.parent.name, f"{app_py} builds another function's handler ({name})"
        # The composition root maps ingest_<step> to IngestSteps.<step> (runtime/lambda_jobs.py).
        assert name.removeprefix("ingest_") in step_methods, f"{name}: {app_py} runs no IngestSteps method"
    assert set(_used_functions()) == set(TASK_FUNCTIONS)


def _used_functions() -> list[str]:
    subs = template()["Resources"]["IngestStateMachine"]["Properties"]["DefinitionSubstitutions"]
    return [v["GetAtt"].split(".")[0] for v in subs.values() if isinstance(v, dict) and "GetAtt" in v]


# ---- executions ---------------------------------------------------------------------------------
class PoisonIndex:
    """The real index, except that writing the chunks of one item always times out (a poison document)."""

    def __init__(self, inner: Any, poison_item: str) -> None:
        self.inner, self.poison_item, self.refused = inner, poison_item, 0

    def upsert(self, org: str, chunks: Any) -> None:
        if any(c.item_id == self.poison_item for c in chunks):
            self.refused += 1
            raise StoreUnavailable("vector store write timed out")
        self.inner.upsert(org, chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _multipart_event(key: str, fields: dict[str, str], files: list[tuple[str, bytes, str]]) -> dict[str, Any]:
    parts: list[tuple[str, Any]] = list(fields.items())
    parts += [("documents", (name, data, ctype)) for name, data, ctype in files]
    body, ctype = urllib3.encode_multipart_formdata(parts)
    ev = event("api_context_ingest", key)
    ev["headers"]["content-type"] = ctype
    ev["body"] = base64.b64encode(body).decode()
    ev["isBase64Encoded"] = True
    return ev


def _ready_database(org: str, name: str) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws
    from ctxstore.services.principal import Principal
    from ctxstore.services.registry import build_services

    svc = build_services(build_aws(Settings()))
    svc.databases.create(Principal(org, "test"), name, None, "database_metadata_schema")
    svc.databases.provision(org, name)


@pytest.fixture(scope="module")
def embedder() -> Any:
    from ctxstore.adapters.local.local_embedder import LocalEmbedder

    embedder = LocalEmbedder()
    # Load the model here, on the main thread, not inside the first Embed task on one of moto's daemon
    # threads: onnxruntime's thread pool then belongs to a thread that lives as long as the process.
    embedder.warm_up()
    return embedder


@pytest.mark.timeout(120)
def test_a_task_whose_handler_exits_fails_its_execution_instead_of_leaving_it_running(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto's task thread catches Exception only: a SystemExit escaping the invoke would end that thread
    silently and the execution would stay RUNNING for good (the shape of issue 7's hang)."""
    from moto.core.config import default_user_config

    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)

    def exits(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise SystemExit(3)

    router = h.LambdaRouter(monkeypatch, {"Exits": exits})
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="exit-sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    machine = {"StartAt": "Run", "States": {"Run": {"Type": "Task", "Resource": h.function_arn("Exits"), "End": True}}}
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = sfn.create_state_machine(name="exits", definition=json.dumps(machine), roleArn=role)["stateMachineArn"]
    sfn.start_execution(stateMachineArn=arn, name="one", input="{}")

    [run] = h.wait_for_executions(arn, 1, timeout_s=30, router=router)
    assert run["status"] == "FAILED", run
    assert run["error"] == "SystemExit", run
    assert [c[2] for c in router.calls] == ["SystemExit"]
    assert router.in_flight == {}


@pytest.mark.timeout(240)  # a run that never ends fails with the stacks instead of stalling the suite
def test_upload_runs_to_completed_and_a_poison_document_to_errored_after_its_retries(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    embedder: Any,
) -> None:
    from moto.core.config import default_user_config

    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex

    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)
    arn = h.create_state_machine()
    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", arn)
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")

    index = SqliteSearchIndex(tmp_path / "search.db")
    poison = PoisonIndex(index, "poison-1")
    modules = {lid: load_function(h.code_dir(lid)) for lid in TASK_FUNCTIONS}
    for m in modules.values():
        m.handler.container.search_index = poison
        m.handler.container.embedder = embedder
    router = h.LambdaRouter(monkeypatch, h.handlers_of(modules))

    # Well over 64 chunks: the Embed Map runs several batches of 64.
    sections = [f"## Section {i}\n\n" + f"Paragraph {i} explains the lighthouse keeper's log. " * 25 for i in range(60)]
    guide = ("# Keeper's guide\n\n" + "\n\n".join(sections)).encode()
    app = [{"id": "poison-1", "title": "Poison", "type": "note", "content": {"text": "This one never indexes."}}]
    api = load_function("api_context_ingest")
    resp = api.handler(
        _multipart_event(
            key,
            {
                "database": "acme",
                "document_metadata": json.dumps([{"id": "guide-1"}]),
                "app_knowledge": json.dumps(app),
            },
            [("guide.md", guide, "text/markdown")],
        ),
        FakeContext(),
    )
    assert resp["statusCode"] == 202, resp
    s3 = boto3.client("s3", region_name=REGION)
    uploads = s3.list_objects_v2(Bucket=aws.names.bucket, Prefix="acme-org/")["Contents"]
    assert any(o["Size"] == len(guide) for o in uploads), "the upload is in S3"

    execs = {e["name"]: e for e in h.wait_for_executions(arn, 2, timeout_s=150, router=router)}
    by_item = {json.loads(e["input"])["payload"]["ref"]["id"]: e for e in execs.values()}
    assert by_item["guide-1"]["status"] == "SUCCEEDED", by_item["guide-1"]
    assert by_item["poison-1"]["status"] == "FAILED", by_item["poison-1"]

    status = load_function("api_context_ingest").handler(event("api_context_ingest_status", key), FakeContext())
    assert status["statusCode"] == 200, status
    statuses = {s["id"]: s for s in json.loads(status["body"])["data"]["statuses"]}
    assert statuses["guide-1"]["indexing_status"] == "completed"
    assert statuses["poison-1"]["indexing_status"] == "errored"
    assert statuses["poison-1"]["error_code"] == "E6001"

    # The guide's chunks are searchable, with vectors; none of the poison's got in.
    chunks = index.item_chunks("acme-org", "acme", "", "knowledge", "guide-1")
    assert len(chunks) > 64 and all(c.vector is not None for c in chunks)
    assert index.item_chunks("acme-org", "acme", "", "knowledge", "poison-1") == []

    # Index of the poison ran 1 + MaxAttempts times, waiting with full jitter under the policy's caps.
    index_calls = [c for c in router.calls if c[0] == "IngestIndexFunction" and c[1]["ref"]["id"] == "poison-1"]
    assert [c[2] for c in index_calls] == ["TransientError"] * INGEST_RETRY.max_attempts
    assert [c[1]["retry_count"] for c in index_calls] == list(range(INGEST_RETRY.max_attempts))
    assert poison.refused == INGEST_RETRY.max_attempts
    assert len(router.waits) == INGEST_RETRY.max_attempts - 1  # the retrier's waits only, one before each retry
    assert all(0 <= w <= INGEST_RETRY.max_delay_s for w in router.waits)

    # One embed task per batch of 64 chunks, and every work file is gone once each item finished.
    embeds = [c for c in router.calls if c[0] == "IngestEmbedFunction" and c[1]["ref"]["id"] == "guide-1"]
    assert sorted(c[1]["batch"]["start"] for c in embeds) == list(range(0, len(chunks), 64))
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=aws.names.bucket)["Contents"]]
    assert not [k for k in left if ".work/" in k], left

    # Status transitions, in order, as the webhook events saw them.
    guide_states = [
        c[0] for c in router.calls if c[1].get("ref", c[1].get("payload", {}).get("ref", {})).get("id") == "guide-1"
    ]
    assert guide_states[0] == "IngestParseFunction" and guide_states[-1] == "IngestCompleteFunction"
    errored_calls = [c for c in router.calls if c[0] == "IngestErroredFunction"]
    assert len(errored_calls) == 1 and "vector store write timed out" in json.dumps(errored_calls[0][1]["error"])
    index.close()
