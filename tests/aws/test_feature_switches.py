"""What the AWS functions answer for features a deployment does not have, and the routes kept cheap.

BYOG needs a graph per collection (403 FORBIDDEN where none is mapped), graph routes need the graph tier
(GraphStore=none: 403 FORBIDDEN, not a retryable 503), and GET /openapi.json answers the whole API's document
from the databases function. Each runs through the real handler under moto (tests/aws/test_handlers.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ctxstore.http.openapi_doc import AWS_DOCUMENT
from tests.aws.moto_env import MotoWorld
from tests.aws.test_handlers import FakeContext, aws, body, event, load_function, new_key  # noqa: F401 (aws: fixture)


def _request(sample: str, method: str, path: str, payload: dict[str, Any] | None, key: str | None) -> dict[str, Any]:
    ev = copy.deepcopy(event(sample, key))
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    ev["body"] = json.dumps(payload) if payload is not None else None
    if key is None:
        ev["headers"].pop("authorization", None)
    return ev


def _byog(fn: Any, key: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    resp: dict[str, Any] = fn.handler(_request("api_byog_query", "POST", path, payload, key), FakeContext())
    return resp


def test_byog_is_refused_with_forbidden_and_a_way_out_when_no_graph_is_provisioned(aws: MotoWorld) -> None:  # noqa: F811
    key = new_key("acme-org")
    fn = load_function("api_byog")
    for path, payload in (
        ("/byog/databases", {"database": "people"}),
        ("/byog/query", {"database": "people", "collection": "friends", "query": "MATCH (n) RETURN n"}),
    ):
        resp = _byog(fn, key, path, payload)
        assert resp["statusCode"] == 403, resp
        out = body(resp)
        assert out["error"]["code"] == "FORBIDDEN"
        message = out["error"]["message"]
        assert (
            "BYOG is not available" in message and "ctxstore serve" in message and "CTXSTORE_BYOG_GRAPH_IDS" in message
        )
        assert "retry-after" not in {h.lower() for h in resp["headers"]}  # not an outage: nothing to retry
        assert out["detail"]["error_code"] == "FORBIDDEN"  # BYOG's mirrored detail (spec: Errors, rule 2)


def test_byog_works_for_a_collection_an_operator_mapped_to_its_own_graph(
    aws: MotoWorld,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXSTORE_GRAPH_ID", "g-shared00001")  # the stack's graph (GraphStore=neptune-analytics)
    monkeypatch.setenv("CTXSTORE_BYOG_GRAPH_IDS", json.dumps({"acme-org/byog:people:friends": "g-byog000001"}))
    key = new_key("acme-org")
    fn = load_function("api_byog")
    created = _byog(fn, key, "/byog/databases", {"database": "people"})
    assert created["statusCode"] == 200, created
    assert body(created)["data"]["database"] == "people"
    other = _byog(fn, key, "/byog/databases", {"database": "other"})  # nothing mapped under it
    assert other["statusCode"] == 403, other
    unmapped = {"database": "people", "collection": "strangers", "query": "MATCH (n) RETURN n"}
    resp = _byog(fn, key, "/byog/query", unmapped)
    assert resp["statusCode"] == 403 and "people/strangers" in body(resp)["error"]["message"], resp


def test_graph_routes_answer_forbidden_when_the_stack_has_no_graph_store(aws: MotoWorld) -> None:  # noqa: F811
    key = new_key("acme-org")
    resp = load_function("api_graphs").handler(event("api_graphs_relations", key), FakeContext())
    assert resp["statusCode"] == 403, resp
    assert body(resp)["error"]["code"] == "FORBIDDEN" and "GraphStore" in body(resp)["error"]["message"]


def test_openapi_json_through_the_databases_function_is_the_whole_api_without_a_key(aws: MotoWorld) -> None:  # noqa: F811
    fn = load_function("api_databases")
    resp = fn.handler(_request("api_health", "GET", "/openapi.json", None, None), FakeContext())
    assert resp["statusCode"] == 200, resp
    doc = json.loads(resp["body"])
    assert doc == json.loads(AWS_DOCUMENT.read_text())
    # every group's routes, though this function holds only the databases router; no local-only /blobs route
    assert {"/databases", "/query", "/context/ingest", "/byog/query", "/connectors", "/health"} <= set(doc["paths"])
    assert not [p for p in doc["paths"] if p.startswith("/blobs/")]
