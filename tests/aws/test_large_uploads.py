"""Large uploads on AWS: a presigned S3 POST bounded by its policy, then POST /context/ingest by reference;
a 50 MB file through the whole state machine within each function's memory; graph_payload at its limits.

moto accepts POSTs to the presigned URL in-process (`requests` is intercepted), but it does not
enforce a POST policy's conditions nor apply its `tagging` field; those are checked on the policy
document S3 itself evaluates. The ingest Lambda then reads the staged object from S3 — the request it
receives is a few hundred bytes, whatever the file's size.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
import urllib3

from ctxstore.adapters.aws.s3_blobs import STAGED_TAG, S3BlobStore
from ctxstore.domain.graph_payload import MAX_ENTITIES, MAX_RELATIONS
from ctxstore.domain.ingest_request import MAX_FILE_BYTES
from ctxstore.pipeline.ingest_steps import WORK_BATCH
from ctxstore.pipeline.publish_groups import PUBLISH_BYTES, PUBLISH_DOCS, doc_bytes
from tests.aws import sfn_harness as h
from tests.aws.fake_opensearch import connection_class as remote_connection
from tests.aws.moto_env import REGION, ROOT, AwsNames, MotoWorld, resource, template
from tests.aws.remote_collection import RemoteTransport, start_server
from tests.aws.test_api_functions import _ready_database
from tests.aws.test_handlers import FakeContext, aws, event, load_function, new_key  # noqa: F401 (aws: fixture)
from tests.aws.test_ingest_state_machine import TASK_FUNCTIONS

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


# ---- a 50 MB file through the whole state machine ------------------------------------------------
MEMORY_SHARE = 0.6  # a step's peak may use at most this share of its function's MemorySize
MB = 1024 * 1024


@dataclass
class Invocation:
    function: str
    event: dict[str, Any]
    traced_peak: int = 0  # bytes tracemalloc saw above the invocation's start
    rss_delta: int = 0  # the RSS high-water mark above the RSS at the invocation's start
    reads: list[tuple[str, int]] = field(default_factory=list)  # S3 GetObject: (key, bytes)
    result: Any = None
    seconds: float = 0.0

    @property
    def peak(self) -> int:
        return max(self.traced_peak, self.rss_delta)


def _status_kb(field_name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field_name} in /proc/self/status")


class StepMeter:
    """Runs every Lambda invocation alone (as its own function instance would) and measures it: the peak of
    what it allocates (tracemalloc, started at its first line and stopped at its last), its RSS high-water
    mark above the RSS it started with (VmHWM, reset through /proc/self/clear_refs), and each S3 GetObject
    it makes (botocore's event hooks on the default session, so every client the functions build has them)."""

    def __init__(self) -> None:
        self.runs: list[Invocation] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._session = boto3._get_default_session()._session  # type: ignore[attr-defined]
        self._session.register("provide-client-params.s3.GetObject", self._before_get, unique_id="meter-get-1")
        self._session.register("after-call.s3.GetObject", self._after_get, unique_id="meter-get-2")

    def close(self) -> None:
        self._session.unregister("provide-client-params.s3.GetObject", unique_id="meter-get-1")
        self._session.unregister("after-call.s3.GetObject", unique_id="meter-get-2")

    def _before_get(self, params: dict[str, Any], **_: Any) -> None:
        self._local.key = params.get("Key")

    def _after_get(self, parsed: dict[str, Any], **_: Any) -> None:
        run: Invocation | None = getattr(self._local, "run", None)
        if run is not None:
            run.reads.append((str(self._local.key), int(parsed.get("ContentLength") or 0)))

    def wrap(self, handlers: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
        return {name: self._measured(name, fn) for name, fn in handlers.items()}

    def _measured(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(event: dict[str, Any], context: Any) -> Any:
            with self._lock:
                rec = Invocation(name, event)
                self._local.run = rec
                Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
                rss0 = _status_kb("VmRSS")
                t0 = time.monotonic()
                tracemalloc.start()
                try:
                    rec.result = fn(event, context)
                    return rec.result
                finally:
                    rec.traced_peak = tracemalloc.get_traced_memory()[1]
                    tracemalloc.stop()
                    rec.seconds = time.monotonic() - t0
                    rec.rss_delta = max(0, _status_kb("VmHWM") - rss0)
                    self._local.run = None
                    self.runs.append(rec)

        return run

    def of(self, function: str) -> list[Invocation]:
        return [r for r in self.runs if r.function == function and "error" not in r.event]


def _cold_start_rss(code_dirs: list[str]) -> int:
    """RSS of a fresh interpreter that imported these functions' app.py (the container each builds included):
    what a function instance holds before its first event."""
    script = (  # VmHWM, not ru_maxrss: Linux carries the forking parent's maximum over exec into ru_maxrss
        "import importlib.util, sys\n"
        "for i, path in enumerate(sys.argv[1:]):\n"
        "    spec = importlib.util.spec_from_file_location(f'fn{i}', path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXSTORE_")}
    env.update(AwsNames().env(), AWS_REGION=REGION, AWS_DEFAULT_REGION=REGION, POWERTOOLS_TRACE_DISABLED="1")
    paths = [str(ROOT / "functions" / d / "app.py") for d in code_dirs]
    out = subprocess.run([sys.executable, "-c", script, *paths], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) * 1024


def _memory_size(logical_id: str) -> int:
    props = resource(logical_id)["Properties"]
    size = props["MemorySize"]
    if isinstance(size, dict):  # !Ref <parameter>: its default
        size = template()["Parameters"][size["Ref"]]["Default"]
    return int(size) * MB


class RecordingIndex:
    """The real index, recording each call the Index step makes on it (the port's call shape)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, int]] = []  # ("delete_item", 0) / ("upsert", chunks)

    def delete_item(self, *args: Any) -> int:
        self.calls.append(("delete_item", 0))
        n: int = self.inner.delete_item(*args)
        return n

    def upsert(self, org: str, chunks: Any) -> None:
        self.calls.append(("upsert", len(chunks)))
        assert sum(doc_bytes(c) for c in chunks) <= PUBLISH_BYTES or len(chunks) == 1
        self.inner.upsert(org, chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _fifty_mb_log() -> bytes:
    """A 50 MB Markdown log of one repeated section: every chunk has one of a handful of texts, so the real
    embedding model (which embeds each distinct text of a call once) runs a few times per batch, not ~20k
    times. The data flow, the chunk count and every chunk's size are those of a real 50 MB file."""
    line = "The lighthouse keeper logs every passing ship, its flag, its heading and the hour it cleared the reef."
    section = "## Log\n\n" + " ".join([line] * 10) + "\n\n"
    head = "# Keeper's log\n\n"
    return (head + section * ((MAX_FILE_BYTES - len(head)) // len(section))).encode()


@pytest.fixture
def search() -> Iterator[tuple[Any, RemoteTransport]]:
    """The OpenSearch Serverless adapter over the fake collection, served from another process."""
    from botocore.credentials import Credentials

    from ctxstore.adapters.aws.opensearch_index import OpenSearchIndex, opensearch_client

    manager, server = start_server()
    transport = RemoteTransport(server)
    client = opensearch_client(
        "https://abc123.us-east-1.aoss.amazonaws.com",
        REGION,
        Credentials("AKIDTEST", "secret"),
        connection_class=remote_connection(transport),
    )
    yield OpenSearchIndex(client, dimension=384), transport
    manager.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_50mb_upload_runs_batch_by_batch_within_60_percent_of_each_functions_memory(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    search: tuple[Any, RemoteTransport],
) -> None:
    """Parse -> Embed (the Map, one batch per task) -> Index -> Graph -> Complete on moto's Step Functions,
    every task the real handler in this process. Chunks go to the real OpenSearch adapter, its collection a
    fake in another process (tests/aws/remote_collection.py). Vectors come from the real local model
    behind the embedder port: moto's bedrock-runtime answers InvokeModel with an empty body, so Titan
    cannot run here; repeated texts are answered from the CachedEmbedder, so the model runs for the few
    distinct chunk texts of the file, not for ~20k chunks."""
    from moto.core.config import default_user_config

    from ctxstore.adapters.models.local_embedder import CachedEmbedder, LocalEmbedder

    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)
    arn = h.create_state_machine()
    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", arn)
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")
    model = LocalEmbedder()
    model.warm_up()  # on this thread: onnxruntime's pool then outlives moto's task threads
    embedder = CachedEmbedder(model)
    index = RecordingIndex(search[0])
    meter = StepMeter()
    try:
        modules = {lid: load_function(h.code_dir(lid)) for lid in TASK_FUNCTIONS}
        for m in modules.values():
            m.handler.container.search_index = index
            m.handler.container.embedder = embedder
        router = h.LambdaRouter(monkeypatch, meter.wrap(h.handlers_of(modules)))

        # The file arrives by reference (the presigned POST is the 7 MB test's): staged, then ingested.
        api = load_function("api_context_ingest")
        ev = event("api_context_ingest_uploads", key)
        ev["body"] = json.dumps({"filename": "log.md", "size_bytes": MAX_FILE_BYTES, "content_type": "text/markdown"})
        grant = json.loads(api.handler(ev, FakeContext())["body"])["data"]
        doc = _fifty_mb_log()
        assert MAX_FILE_BYTES - 2048 < len(doc) <= MAX_FILE_BYTES
        s3 = boto3.client("s3", region_name=REGION)
        s3.put_object(Bucket=aws.names.bucket, Key=grant["fields"]["key"], Body=doc)
        del doc
        body, ctype = urllib3.encode_multipart_formdata(
            [
                ("database", "acme"),
                ("document_metadata", json.dumps([{"id": "log-1"}])),
                ("uploads", json.dumps([{"upload_id": grant["upload_id"]}])),
            ]
        )
        ev = event("api_context_ingest", key)
        ev["headers"]["content-type"] = ctype
        ev["body"] = base64.b64encode(body).decode()
        assert api.handler(ev, FakeContext())["statusCode"] == 202

        [run] = h.wait_for_executions(arn, 1, timeout_s=360, router=router)
        assert run["status"] == "SUCCEEDED", run
    finally:
        meter.close()

    # Searchable: every chunk, with its vector.
    [parse] = meter.of("IngestParseFunction")
    parsed_out = parse.result
    n_chunks, batches = parsed_out["chunks"], parsed_out["batches"]
    assert n_chunks > 15_000 and len(batches) == -(-n_chunks // WORK_BATCH)
    assert index.count("acme-org", "acme", "knowledge") == n_chunks
    ev = event("api_context_ingest_status", key)
    ev["rawQueryString"], ev["queryStringParameters"] = "database=acme&ids=log-1", {"database": "acme", "ids": "log-1"}
    [st] = json.loads(api.handler(ev, FakeContext())["body"])["data"]["statuses"]
    assert st["indexing_status"] == "completed"

    # Each Embed task read exactly its own batch of chunks, nothing else.
    work = parsed_out["work"]
    embeds = meter.of("IngestEmbedFunction")
    assert sorted(e.event["batch"]["start"] for e in embeds) == [b["start"] for b in batches]
    chunk_objects: dict[str, int] = {}
    for e in embeds:
        [(read_key, size)] = e.reads
        assert read_key == f"acme-org/{work}chunks/{e.event['batch']['start']:08d}.json", read_key
        chunk_objects[read_key] = size
    assert max(chunk_objects.values()) < WORK_BATCH * 4 * 1024  # its chunks of a few KB each, not the file

    # Index read each batch's chunks and vectors once, and wrote them in bounded upserts after one delete,
    # each sent as bulk requests of bounded size.
    [idx] = meter.of("IngestIndexFunction")
    index_reads = dict(idx.reads)
    assert len(idx.reads) == len(index_reads) == 2 * len(batches) + 1  # + the manifest
    assert {k for k in index_reads if "/chunks/" in k} == set(chunk_objects)
    kinds = [c for c, _ in index.calls]
    assert kinds[0] == "delete_item" and kinds.count("delete_item") == 1
    upserts = [n for c, n in index.calls if c == "upsert"]
    assert sum(upserts) == n_chunks and max(upserts) <= PUBLISH_DOCS
    bulks = [size for method, path, size in search[1].sent if path.endswith("/_bulk")]
    assert len(bulks) >= len(upserts) and max(bulks) <= 5 * MB

    # Memory: the function's cold-start RSS plus the step's peak stays within 60 % of its MemorySize.
    baseline = _cold_start_rss([h.code_dir(f) for f in ("IngestEmbedFunction", "IngestIndexFunction")])
    peaks = {
        "IngestParseFunction": parse.peak,
        "IngestEmbedFunction": max(e.peak for e in embeds),
        "IngestIndexFunction": idx.peak,
        "IngestGraphFunction": max(g.peak for g in meter.of("IngestGraphFunction")),
    }
    report = {f: (round(p / MB), round((baseline + p) / _memory_size(f) * 100)) for f, p in peaks.items()}
    print(f"\n50 MB, {n_chunks} chunks, cold-start RSS {baseline / MB:.0f} MB; step peak MB, % of memory: {report}")
    for function, peak in peaks.items():
        assert baseline + peak <= MEMORY_SHARE * _memory_size(function), (function, report)


# ---- graph_payload at the API's limits ---------------------------------------------------------
DDB_ITEM_LIMIT = 400 * 1024


def _ddb_item_size(item: dict[str, Any]) -> int:
    """DynamoDB's item size: each attribute name's UTF-8 bytes plus its value's (strings UTF-8, binary raw,
    numbers ~ digits / 2 + 1)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        ((kind, v),) = value.items()
        if kind == "S":
            size += len(v.encode())
        elif kind == "B":
            size += len(v)
        elif kind == "N":
            size += len(v) // 2 + 1
        else:
            size += len(json.dumps(v).encode())
    return size


def _max_graph_payload() -> dict[str, Any]:
    """MAX_ENTITIES entities and MAX_RELATIONS relations, 4 per entity (under the per-entity cap)."""
    n_ent, n_rel = MAX_ENTITIES, MAX_RELATIONS
    entities = {
        f"e{i}": {"name": f"Keeper station {i} of the northern reef", "type": "place", "namespace": "coast"}
        for i in range(n_ent)
    }
    relations = [
        {
            "source": f"e{i % n_ent}",
            "target": f"e{(i * 7 + 1) % n_ent}",
            "predicate": "signals_to",
            "context": f"Station {i % n_ent} signals station {(i * 7 + 1) % n_ent} at dusk.",
            "temporal_details": None,
        }
        for i in range(n_rel)
    ]
    return {"entities": entities, "relations": relations}


@pytest.mark.timeout(300)
def test_a_graph_payload_at_the_api_limits_is_stored_in_s3_and_built_by_the_graph_step(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """POST /context/ingest through the API function, then the Step Functions tasks' handlers in order. The
    graph store is the local FalkorDB adapter standing in for Neptune (whose dialect and namespacing
    tests/aws/test_neptune_graph.py covers): what is tested here is where the payload lives and travels."""
    from ctxstore.adapters.local.falkordb_engine import FalkorEngine
    from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore
    from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
    from ctxstore.adapters.models.local_embedder import LocalEmbedder
    from ctxstore.domain.graph_keys import graph_name

    monkeypatch.setenv("CTXSTORE_STATE_MACHINE_ARN", h.create_state_machine())  # started, not executed here
    monkeypatch.setenv("CTXSTORE_GRAPH_ID", "g-abcde12345")
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")
    engine = FalkorEngine(tmp_path / "graph")
    falkor = FalkorGraphStore(engine)
    try:
        graph = falkor
        index = SqliteSearchIndex(tmp_path / "search.db")
        embedder = LocalEmbedder()
        payload = _max_graph_payload()
        text = "Station 0 signals station 1 at dusk. The keepers log every signal."
        items = [{"id": "g-1", "title": "Signals", "type": "note", "content": {"text": text}}]
        body, ctype = urllib3.encode_multipart_formdata(
            [
                ("database", "acme"),
                ("app_knowledge", json.dumps(items)),
                ("graph_payload", json.dumps({"g-1": payload})),
            ]
        )
        assert len(body) < LAMBDA_PAYLOAD_CAP * 3 // 4  # fits a Lambda request once base64-encoded
        api = load_function("api_context_ingest")
        ev = event("api_context_ingest", key)
        ev["headers"]["content-type"] = ctype
        ev["body"] = base64.b64encode(body).decode()
        ev["isBase64Encoded"] = True
        resp = api.handler(ev, FakeContext())
        assert resp["statusCode"] == 202, resp
        [result] = json.loads(resp["body"])["data"]["results"]
        assert (result["status"], result["relations_created"]) == ("queued", MAX_RELATIONS)

        # Every record stays far below DynamoDB's item limit; the payload itself is an S3 object.
        ddb = boto3.client("dynamodb", region_name=REGION)
        records = ddb.scan(TableName=aws.names.records_table)["Items"]
        assert max(_ddb_item_size(r) for r in records) < DDB_ITEM_LIMIT
        [ref_record] = [r for r in records if r["pk"]["S"].startswith("acme-org#graph_payload#")]
        assert _ddb_item_size(ref_record) < 2048
        s3 = boto3.client("s3", region_name=REGION)
        listed = s3.list_objects_v2(Bucket=aws.names.bucket, Prefix="acme-org/")["Contents"]
        [blob] = [o for o in listed if o["Key"].endswith(".graph.json")]
        assert blob["Size"] > DDB_ITEM_LIMIT  # what one DynamoDB item could not hold

        # The tasks, in the state machine's order, on the execution's input.
        sfn = boto3.client("stepfunctions", region_name=REGION)
        [execution] = sfn.list_executions(stateMachineArn=os.environ["CTXSTORE_STATE_MACHINE_ARN"])["executions"]
        started = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
        task = {"org": started["org"], "ref": started["payload"]["ref"], "version": started["payload"]["version"]}
        fns = {step: load_function(f"ingest_{step}") for step in ("parse", "embed", "index", "graph", "complete")}
        for fn in fns.values():
            fn.handler.container.search_index = index
            fn.handler.container.embedder = embedder
            fn.handler.container.graph = graph
        parsed = fns["parse"].handler({**task, "payload": started["payload"]}, FakeContext())
        work = {**task, "work": parsed["work"]}
        for batch in parsed["batches"]:
            fns["embed"].handler({**work, "batch": batch}, FakeContext())
        assert fns["index"].handler(work, FakeContext())["outcome"] == "continue"
        out = fns["graph"].handler(work, FakeContext())
        assert out == {"relations": MAX_RELATIONS}
        fns["complete"].handler({**work, "relations": out["relations"]}, FakeContext())
        cypher = "MATCH ()-[r:REL]->() WHERE r.origin = 'byog' RETURN count(r)"
        rels = falkor.query("acme-org", graph_name("knowledge", "acme", ""), cypher)
        assert rels.rows == [[MAX_RELATIONS]]

        # Deleting the item deletes the payload's object and its record.
        items_api = load_function("api_context_items")
        items_api.handler.container.graph = graph
        items_api.handler.container.search_index = index
        ev = event("api_context_items_list", key)
        ev["routeKey"] = "DELETE /context"
        ev["requestContext"]["http"]["method"] = "DELETE"
        ev["requestContext"]["routeKey"] = "DELETE /context"
        ev["rawPath"] = ev["requestContext"]["http"]["path"] = "/context"
        ev["body"] = json.dumps({"database": "acme", "ids": ["g-1"], "type": "knowledge"})
        resp = items_api.handler(ev, FakeContext())
        assert resp["statusCode"] == 200, resp
        left = s3.list_objects_v2(Bucket=aws.names.bucket, Prefix="acme-org/").get("Contents", [])
        assert not [o for o in left if o["Key"].endswith(".graph.json")], left
        records = ddb.scan(TableName=aws.names.records_table)["Items"]
        assert not [r for r in records if r["pk"]["S"].startswith("acme-org#graph_payload#")]
        index.close()
    finally:
        falkor.close()
        engine.stop()
