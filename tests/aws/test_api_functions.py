"""Every API function: run with each of its events/ samples under moto, and loading only its own router group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.aws.fake_opensearch import FakeCollection, RecordingAdapter, connection_class
from tests.aws.moto_env import ROOT, MotoWorld, template
from tests.aws.test_handlers import FakeContext, aws, event, load_function, new_key  # noqa: F401 (aws: fixture)

EVENTS = ROOT / "events"


def _api_functions() -> dict[str, str]:
    """logical id -> code folder of every api_* function in the template."""
    out: dict[str, str] = {}
    for logical_id, res in template()["Resources"].items():
        if res["Type"] == "AWS::Serverless::Function":
            folder = Path(res["Properties"]["CodeUri"]).name
            if folder.startswith("api_"):
                out[logical_id] = folder
    return out


def _ready_database(org: str, name: str) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws
    from ctxstore.services.access.principal import Principal
    from ctxstore.services.registry import build_services

    svc = build_services(build_aws(Settings()))
    svc.databases.create(Principal(org, "test"), name, None, "database_metadata_schema")
    svc.databases.provision(org, name)


@pytest.fixture
def search(monkeypatch: pytest.MonkeyPatch) -> RecordingAdapter:
    """Every function gets the OpenSearch Serverless adapter (CTXSTORE_SEARCH_ENDPOINT, as the template sets it),
    its signed requests answered by an in-memory collection (tests/aws/fake_opensearch.py): moto has no AOSS."""
    import ctxstore.adapters.aws.opensearch_index as opensearch_index

    adapter = RecordingAdapter(FakeCollection())
    monkeypatch.setattr(opensearch_index, "RequestsHttpConnection", connection_class(adapter))
    monkeypatch.setenv("CTXSTORE_SEARCH_ENDPOINT", "https://abc123.us-east-1.aoss.amazonaws.com")
    return adapter


# What each sample answers on a fresh deployment with one ready database "acme" and no data yet.
EXPECTED: dict[str, int] = {
    "api_health": 200,
    "api_databases_list": 200,
    "api_databases_status": 200,
    "api_databases_create": 409,  # "acme" exists already
    "api_context_ingest": 503,  # accepted only where a state machine is configured (the ingest test has one)
    "api_context_ingest_uploads": 201,  # a presigned S3 POST for a 30 MB file (tests/aws/test_large_uploads.py)
    "api_context_ingest_status": 404,  # FILE_NOT_FOUND: nothing ingested yet (the ingest test sees 200)
    "api_context_items_list": 200,
    "api_byog_query": 403,  # FORBIDDEN: no BYOG graph on this deployment (tests/aws/test_feature_switches.py)
    "api_webhooks_list": 200,
    "api_query": 200,  # text-only (no Bedrock model configured here) over the empty search index
    "api_graphs_relations": 403,  # FORBIDDEN: no CTXSTORE_GRAPH_ID = GraphStore none (Neptune: test_neptune_graph.py)
    # no CTXSTORE_CONNECTOR_KMS_KEY_ID here: no credential vault (tests/aws/test_connector_sync.py has one)
    "api_connectors_create": 503,
    "api_connectors_configure": 503,
}


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_each_sample_event_runs_through_its_function(
    aws: MotoWorld,  # noqa: F811
    search: RecordingAdapter,
    sample: str,
) -> None:
    key = new_key("acme-org")
    _ready_database("acme-org", "acme")
    folder = next(f for f in _api_functions().values() if sample == f or sample.startswith(f + "_"))
    resp: dict[str, Any] = load_function(folder).handler(event(sample, key), FakeContext())
    assert resp["statusCode"] == EXPECTED[sample], resp
    body = json.loads(resp["body"])
    assert resp["headers"]["x-api-version"].startswith("2.")
    if resp["statusCode"] >= 400:
        assert body["error"]["code"] and body["error"]["message"], body
    else:
        assert isinstance(body, dict) and body, body


def test_every_api_function_has_an_expected_sample() -> None:
    samples = {p.stem for p in EVENTS.glob("api_*.json")}
    assert samples == set(EXPECTED), samples ^ set(EXPECTED)


HEAVY = (
    "fastapi",
    "boto3",
    "numpy",
    "aws_xray_sdk",
    "slack_sdk",
    "githubkit",
    "notion_client",
    "googleapiclient",
    "pypdfium2",
    "openpyxl",
)


def test_each_api_function_imports_only_its_own_router_group() -> None:
    """A cold start loads one router group and no connector SDK, parser or X-Ray SDK; the health check loads
    neither the web framework nor boto3: the module list after importing the handler, in a fresh process."""
    code = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
routers = sorted(n for n in sys.modules if n.startswith("ctxstore.http.routers."))
print(json.dumps([routers, sorted(h for h in {HEAVY!r} if h in sys.modules)]))
"""
    env = {
        **os.environ,
        "CTXSTORE_BACKEND": "aws",
        "CTXSTORE_RECORDS_TABLE": "t",
        "CTXSTORE_JOBS_TABLE": "j",
        "CTXSTORE_BLOB_BUCKET": "b",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }
    for folder in sorted(set(_api_functions().values())):
        proc = subprocess.run(
            [sys.executable, "-c", code, str(ROOT / "functions" / folder / "app.py")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        routers, heavy = json.loads(proc.stdout.strip().splitlines()[-1])
        if folder == "api_health":
            assert (routers, heavy) == ([], []), (folder, routers, heavy)
            continue
        group = folder.removeprefix("api_")
        # The query group also serves POST /feedback (the template routes it to the query function).
        own = {group} | ({"feedback"} if group == "query" else set())
        assert routers == sorted(f"ctxstore.http.routers.{g}" for g in own), (folder, routers)
        # Every API function authenticates against DynamoDB (boto3, built in the cold start); only the query
        # function embeds and ranks (numpy); none loads the X-Ray SDK unless CTXSTORE_TRACE_AWS_CALLS asks.
        expected = {"fastapi", "boto3"} | ({"numpy"} if folder == "api_query" else set())
        sdks = {"slack_sdk", "githubkit", "notion_client", "googleapiclient"}
        if folder == "api_connectors":  # its routes call the providers: it may load their SDKs
            heavy = [h for h in heavy if h not in sdks]
        assert set(heavy) == expected, (folder, heavy)


def test_query_function_searches_the_collection(aws: MotoWorld, search: RecordingAdapter) -> None:  # noqa: F811
    """POST /query through its Lambda: the chunk indexed in the collection comes back; requests are SigV4 for aoss."""
    from ctxstore.config import Settings
    from ctxstore.domain.items import item_pk
    from ctxstore.ports.records import Put
    from ctxstore.ports.search_index import ChunkDoc
    from ctxstore.runtime.aws import build_aws
    from ctxstore.services.items.service import ITEM
    from tests.support.items import item_record

    key = new_key("acme-org")
    _ready_database("acme-org", "acme")
    container = build_aws(Settings())
    index = container.search_index
    assert index is not None
    for item_id in ("doc1", "doc2"):  # /query returns only chunks whose item record exists
        data = item_record(item_id, source_type="file", database="acme")
        container.records.put("acme-org", Put(ITEM, item_pk("acme", "", "knowledge"), item_id, data))
    index.upsert(
        "acme-org",
        [
            ChunkDoc(
                "doc1#0", "doc1", "acme", "", "knowledge", "Solar panels convert sunlight into electricity.", None
            ),
            ChunkDoc("doc2#0", "doc2", "acme", "", "knowledge", "Bread needs flour, water and yeast.", None),
        ],
    )
    resp: dict[str, Any] = load_function("api_query").handler(event("api_query", key), FakeContext())
    assert resp["statusCode"] == 200, resp
    body = json.loads(resp["body"])
    assert "doc1#0" in json.dumps(body) and "doc2#0" not in json.dumps(body), body
    searches = [r for r in search.requests if r.path.endswith("/_search")]
    assert searches and all("/us-east-1/aoss/aws4_request" in r.headers["Authorization"] for r in searches)
    keyword = next(r.body["query"]["bool"] for r in searches if "must" in r.body["query"].get("bool", {}))
    assert keyword["filter"][:3] == [
        {"term": {"org": "acme-org"}},
        {"term": {"database": "acme"}},
        {"term": {"store": "knowledge"}},
    ]
    assert keyword["must"][0]["multi_match"]["query"] == "how do solar panels work"
