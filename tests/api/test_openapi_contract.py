"""Issue 12 item 9: /openapi.json tells the truth, checked by schemathesis against a live `ctxstore serve`.

Every documented operation is called with generated inputs (valid and invalid) and its answers must be
declared: no 5xx, every status documented for that operation, the declared content type, and a body
matching the declared schema (the envelope, the failure envelope, the reference's data shapes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.support.connectors import connector_env
from tests.support.server import ServerProcess

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
SERVER: dict[str, Any] = {}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    # Connector routes call their provider: the Slack and GitHub SDKs talk to local fakes (no provider is
    # reachable from here, and an unreachable one would be a 502 that the not-a-server-error check refuses).
    with (
        FakeSlack() as slack,
        FakeGitHub() as github,
        ServerProcess(tmp_path_factory.mktemp("openapi") / "data", env=connector_env(slack, github)) as srv,
    ):
        srv.wait_ready()
        [key] = srv.printed_keys
        with srv.client(key) as c:
            assert c.post("/databases", json={"database": "acme"}).status_code == 202
            deadline = time.time() + 30
            while not c.get("/databases/status", params={"database": "acme"}).json()["data"]["infra"][
                "ready_for_ingestion"
            ]:
                assert time.time() < deadline
                time.sleep(0.05)
            item = {"id": "a1", "title": "Alpha", "type": "note", "content": {"text": "Alice works at Acme."}}
            c.post("/context/ingest", data={"database": "acme", "app_knowledge": json.dumps([item])})
            slack.add_token("xoxb-contract")
            slack.add_channel("C1", "general")
            body = {"provider": "slack", "database": "acme", "credentials": {"access_token": "xoxb-contract"}}
            assert c.post("/connectors", json=body).status_code == 201  # so GET /connectors lists a real one
        SERVER.update(srv=srv, key=key)
        yield SERVER


@pytest.fixture(scope="module")
def api_schema(live: dict[str, Any]) -> Any:
    srv = live["srv"]
    return schemathesis.openapi.from_url(f"{srv.base_url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case: Any, live: dict[str, Any]) -> None:
    srv, key = live["srv"], live["key"]
    case.call_and_validate(
        base_url=srv.base_url,
        headers={"Authorization": f"Bearer {key}", "API-Version": "2"},
        checks=CHECKS,
        timeout=30,
    )


def test_the_packaged_reference_shapes_match_the_reference() -> None:
    """reference_shapes.json is derived from the reference OpenAPI; regenerate it when the reference changes:
    `uv run python -c "import json; from ctxstore.http.openapi_doc import extract_shapes as e, SHAPES_FILE as f;
    f.write_text(json.dumps(e(json.load(open('../shared/spec/reference-openapi-v2.json'))), indent=1,
    sort_keys=True) + chr(10))"`."""
    from ctxstore.http.openapi_doc import SHAPES_FILE, extract_shapes
    from tests.support.reference_schema import reference

    assert json.loads(SHAPES_FILE.read_text()) == json.loads(json.dumps(extract_shapes(reference())))
