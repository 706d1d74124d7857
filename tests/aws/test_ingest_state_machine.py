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
import time
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
        retry = state["Retry"][0]  # first: a retrier's error is matched by the first retrier naming it
        assert "TransientError" in retry["ErrorEquals"], name
        # RetryPolicy.max_attempts counts attempts; ASL MaxAttempts counts retries after the first.
        assert retry["MaxAttempts"] == INGEST_RETRY.max_attempts - 1, name
        assert retry["IntervalSeconds"] == INGEST_RETRY.interval_s, name
        assert retry["BackoffRate"] == INGEST_RETRY.backoff_rate, name
        assert retry["MaxDelaySeconds"] == INGEST_RETRY.max_delay_s, name
        assert retry["JitterStrategy"] == ("FULL" if INGEST_RETRY.jitter else "NONE"), name


CRASHES = ("Lambda.Unknown", "Sandbox.Timedout", "Runtime.ExitError", "Runtime.OutOfMemory")


def _function_timeout(task: dict[str, Any]) -> int:
    tpl = template()
    subs = tpl["Resources"]["IngestStateMachine"]["Properties"]["DefinitionSubstitutions"]
    logical_id = subs[task["Resource"].removeprefix("${").removesuffix("}")]["GetAtt"].split(".")[0]
    props = tpl["Resources"][logical_id]["Properties"]
    return int(props.get("Timeout", tpl["Globals"]["Function"]["Timeout"]))


def test_every_task_times_out_within_its_function_and_retries_a_crashed_invocation_a_bounded_number_of_times() -> None:
    """Step Functions reports an invocation that ran out of memory or hit the function's timeout as
    Lambda.Unknown (newer runtimes name it Sandbox.Timedout / Runtime.ExitError); a state timeout longer than
    the function's own would never fire."""
    for name, state in _tasks(_asl()["States"]):
        assert 0 < state["TimeoutSeconds"] <= _function_timeout(state), name
        crash = [r for r in state["Retry"] if "Lambda.Unknown" in r["ErrorEquals"]]
        assert len(crash) == 1 and set(CRASHES) <= set(crash[0]["ErrorEquals"]), name
        assert 1 <= crash[0]["MaxAttempts"] <= 3, f"{name}: an out-of-memory input fails again; retry it briefly"
        last = state["Retry"][-1]
        assert last["ErrorEquals"] == ["States.TaskFailed"] and last["MaxAttempts"] == 1, name
        # Every retrier is bounded, so a failing item reaches MarkErrored.
        assert all(0 < r["MaxAttempts"] <= 5 for r in state["Retry"]), name


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
    from ctxstore.services.access.principal import Principal
    from ctxstore.services.registry import build_services

    svc = build_services(build_aws(Settings()))
    svc.databases.create(Principal(org, "test"), name, None, "database_metadata_schema")
    svc.databases.provision(org, name)


@pytest.fixture(scope="module")
def embedder() -> Any:
    from ctxstore.adapters.models.local_embedder import LocalEmbedder

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

    # Well over 64 chunks: with batches of 64 (256 in production) the Embed Map runs several.
    monkeypatch.setattr("ctxstore.pipeline.ingest_steps.WORK_BATCH", 64)
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


def _fails_once(handler: Any, error: str) -> Any:
    """The handler, except that its first invocation raises an error of this name (as Lambda would report it)."""
    failed = []

    def wrapped(event: dict[str, Any], context: Any) -> Any:
        if not failed:
            failed.append(error)
            raise type(error, (Exception,), {})("injected: Task timed out after 300.00 seconds")
        return handler(event, context)

    return wrapped


@pytest.mark.timeout(240)
def test_items_whose_tasks_meet_throttling_and_5xx_for_a_while_still_complete(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    embedder: Any,
) -> None:
    """DynamoDB and S3 answer the tasks' first requests with throttles and 500s (at the wire, more than
    botocore's own 3 attempts absorb): each fault outlasting them surfaces as StoreUnavailable -> TransientError,
    Step Functions retries the task. One Index invocation times out (Sandbox.Timedout) and one Graph
    invocation fails on a stray error (States.TaskFailed): both are retried. Every item completes; none is
    lost or errored."""
    import threading

    from moto.core.config import default_user_config

    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
    from tests.aws.test_faults import WireFaults, record_backoffs, session_faults

    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)
    arn = h.create_state_machine()
    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", arn)
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")

    def in_a_task() -> bool:  # only the tasks' requests, not the API's: the router knows which threads run tasks
        return threading.current_thread().name in router.in_flight

    backoffs = record_backoffs(monkeypatch)
    throttles = WireFaults(8, code="ProvisionedThroughputExceededException", when=in_a_task)
    server_errors = WireFaults(7, code="InternalError", status=500, when=in_a_task)
    session_faults(monkeypatch, throttles, "dynamodb")
    session_faults(monkeypatch, server_errors, "s3")

    index = SqliteSearchIndex(tmp_path / "search.db")
    modules = {lid: load_function(h.code_dir(lid)) for lid in TASK_FUNCTIONS}
    for m in modules.values():
        m.handler.container.search_index = index
        m.handler.container.embedder = embedder
    handlers = h.handlers_of(modules)
    # One invocation of Index dies the way Lambda reports a function timeout, one of Graph on a stray error.
    handlers["IngestIndexFunction"] = _fails_once(handlers["IngestIndexFunction"], "Sandbox.Timedout")
    handlers["IngestGraphFunction"] = _fails_once(handlers["IngestGraphFunction"], "RuntimeError")
    router = h.LambdaRouter(monkeypatch, handlers)

    ids = [f"note-{i}" for i in range(3)]
    app = [{"id": i, "title": i, "type": "note", "content": {"text": f"Note {i} about tide tables."}} for i in ids]
    api = load_function("api_context_ingest")
    resp = api.handler(_multipart_event(key, {"database": "acme", "app_knowledge": json.dumps(app)}, []), FakeContext())
    assert resp["statusCode"] == 202, resp

    execs = h.wait_for_executions(arn, len(ids), timeout_s=180, router=router)
    assert [e["status"] for e in execs] == ["SUCCEEDED"] * len(ids), execs
    assert throttles.left == 0 and server_errors.left == 0, "every injected fault was met"
    retried = [c for c in router.calls if c[2] == "TransientError"]
    assert retried, "some task failed on a fault and was retried by the state machine"
    assert not [c for c in router.calls if c[0] == "IngestErroredFunction"]
    assert backoffs, "botocore retried first"
    outcomes = {(c[0], c[2]) for c in router.calls}
    assert {("IngestIndexFunction", "Sandbox.Timedout"), ("IngestGraphFunction", "RuntimeError")} <= outcomes

    ask = event("api_context_ingest_status", key)
    ask["rawQueryString"] = "database=acme&ids=" + ",".join(ids)
    ask["queryStringParameters"] = {"database": "acme", "ids": ",".join(ids)}
    status = api.handler(ask, FakeContext())
    assert status["statusCode"] == 200, status
    statuses = {s["id"]: s["indexing_status"] for s in json.loads(status["body"])["data"]["statuses"]}
    assert statuses == dict.fromkeys(ids, "completed")
    for i in ids:
        assert index.item_chunks("acme-org", "acme", "", "knowledge", i), i
    index.close()


@pytest.mark.timeout(300)
def test_a_burst_of_items_runs_with_at_most_the_bound_of_executions_at_once(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    embedder: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The API only queues starts; functions/ingest_starter, played by two threads as its event source mapping
    with MaximumConcurrency 2 would run it, starts them while fewer than CTXSTORE_INGEST_MAX_RUNNING run.
    A watcher polling ListExecutions never sees more running; every item completes."""
    import threading

    from moto.core.config import default_user_config

    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex

    bound, items = 2, 8
    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)
    arn = h.create_state_machine()
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="ingest-start")["QueueUrl"]
    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", arn)
    monkeypatch.setenv("CTXSTORE_INGEST_START_QUEUE_URL", url)
    monkeypatch.setenv("CTXSTORE_INGEST_MAX_RUNNING", str(bound))
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")

    index = SqliteSearchIndex(tmp_path / "search.db")
    modules = {lid: load_function(h.code_dir(lid)) for lid in TASK_FUNCTIONS}
    for m in modules.values():
        m.handler.container.search_index = index
        m.handler.container.embedder = embedder
    router = h.LambdaRouter(monkeypatch, h.handlers_of(modules))

    ids = [f"note-{i}" for i in range(items)]
    app = [{"id": i, "title": i, "type": "note", "content": {"text": f"Note {i} on harbour tides."}} for i in ids]
    api = load_function("api_context_ingest")
    resp = api.handler(_multipart_event(key, {"database": "acme", "app_knowledge": json.dumps(app)}, []), FakeContext())
    assert resp["statusCode"] == 202, resp
    sfn = boto3.client("stepfunctions", region_name=REGION)
    assert sfn.list_executions(stateMachineArn=arn)["executions"] == [], "the API only queued the starts"

    starter = load_function("ingest_starter")
    starter.handler.starts.poll_s = 0.05
    waited: list[float] = []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        time.sleep(seconds)

    starter.handler.starts.sleep = sleep
    peak, stop = [0], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            execs = sfn.list_executions(stateMachineArn=arn)["executions"]
            peak[0] = max(peak[0], sum(e["status"] == "RUNNING" for e in execs))
            time.sleep(0.01)

    invocations: list[dict[str, Any]] = []

    def event_source_mapping() -> None:  # receive a batch, invoke, delete what was not reported
        while len(sfn.list_executions(stateMachineArn=arn)["executions"]) < items:
            msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3).get("Messages", [])
            if not msgs:
                time.sleep(0.05)
                continue
            records = [
                {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]} for m in msgs
            ]
            out = starter.handler({"Records": records}, FakeContext(remaining_ms=12_000))
            invocations.append(out)
            failed = {f["itemIdentifier"] for f in out["batchItemFailures"]}
            for m in msgs:
                if m["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    pollers = [threading.Thread(target=event_source_mapping, daemon=True) for _ in range(2)]
    for t in pollers:
        t.start()
    for t in pollers:
        t.join(timeout=200)
    execs = h.wait_for_executions(arn, items, timeout_s=120, router=router)
    stop.set()
    watcher.join()

    assert sorted(json.loads(e["input"])["payload"]["ref"]["id"] for e in execs) == ids, "one execution per item"
    assert [e["status"] for e in execs] == ["SUCCEEDED"] * items
    assert 1 <= peak[0] <= bound, f"{peak[0]} executions ran at once, the bound is {bound}"
    assert waited, "the starter waited for a free slot"
    with capsys.disabled():
        print(f"\n{items} items, bound {bound}: at most {peak[0]} running at once, {len(invocations)} starter runs")
    assert "ReceiptHandle" not in json.dumps(sqs.receive_message(QueueUrl=url)), "the queue is drained"
    ask = event("api_context_ingest_status", key)
    ask["rawQueryString"] = "database=acme&ids=" + ",".join(ids)
    ask["queryStringParameters"] = {"database": "acme", "ids": ",".join(ids)}
    statuses = {
        s["id"]: s["indexing_status"] for s in json.loads(api.handler(ask, FakeContext())["body"])["data"]["statuses"]
    }
    assert statuses == dict.fromkeys(ids, "completed")
    index.close()
