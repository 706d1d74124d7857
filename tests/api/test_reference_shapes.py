"""Issue 12 item 10: every route's response fields against the reference OpenAPI's schemas.

Clients generated from the hosted service's reference break on a declared field of another JSON
type or a missing required one; `tests/support/reference_schema.py` checks exactly that, per route,
on live answers over seeded data.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.app import LocalApp
from tests.support.reference_schema import mismatches, success_schema

ITEM = {
    "id": "a1",
    "title": "Alpha",
    "type": "note",
    "content": {"text": "Alice works at Acme in Paris. Bob manages the Paris office."},
    "additional_metadata": {"k": "v"},
}

# (method, reference path, our path, request arguments)
CALLS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("GET", "/context/status", "/context/status", {"params": {"database": "acme", "ids": "a1"}}),
    ("POST", "/context/list", "/context/list", {"json": {"database": "acme"}}),
    ("GET", "/context/inspect", "/context/inspect", {"params": {"database": "acme", "id": "a1"}}),
    ("GET", "/context/relations", "/context/relations", {"params": {"database": "acme"}}),
    (
        "PATCH",
        "/context/{id}/metadata",
        "/context/a1/metadata",
        {"json": {"database": "acme", "collection": "", "additional_metadata": {"z": 1}}},
    ),
    ("POST", "/query", "/query", {"json": {"database": "acme", "query": "Alice Acme Paris"}}),
    ("POST", "/query", "/query", {"json": {"database": "acme", "query": "Alice", "mode": "thinking"}}),
    ("GET", "/databases", "/databases", {}),
    ("GET", "/databases/collections", "/databases/collections", {"params": {"database": "acme"}}),
    ("GET", "/databases/stats", "/databases/stats", {"params": {"database": "acme"}}),
    ("GET", "/databases/status", "/databases/status", {"params": {"database": "acme"}}),
    ("GET", "/webhooks/indexing", "/webhooks/indexing", {}),
    ("GET", "/webhooks/indexing/deliveries", "/webhooks/indexing/deliveries", {}),
    ("POST", "/databases", "/databases", {"json": {"database": "other"}}),
    ("DELETE", "/databases", "/databases", {"params": {"database": "other"}}),
    ("DELETE", "/context", "/context", {"json": {"database": "acme", "ids": ["a1"]}}),
]


@pytest.fixture
def seeded(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme")
    form = {"database": "acme", "app_knowledge": json.dumps([ITEM])}
    r = local.client.post("/context/ingest", data=form, headers=local.headers())
    assert r.status_code == 202
    assert mismatches(r.json(), success_schema("POST", "/context/ingest")) == []
    local.drain()
    return local


def test_every_route_answers_in_the_reference_shapes(seeded: LocalApp) -> None:
    problems: dict[str, list[str]] = {}
    for method, ref_path, path, kwargs in CALLS:
        r = seeded.client.request(method, path, headers=seeded.headers(), **kwargs)
        assert r.status_code < 300, (method, path, r.text)
        found = mismatches(r.json(), success_schema(method, ref_path))
        if found:
            problems[f"{method} {path}"] = found
    assert problems == {}


SOURCE_INFO = {"$ref": "#/components/schemas/search.SourceInfo"}


def test_listed_sources_have_the_reference_source_shape(seeded: LocalApp) -> None:
    """The reference types listing items loosely; its one typed source (search.SourceInfo, with the RFC 3339
    `timestamp` its examples show) is what generated clients decode them with."""
    body = seeded.client.post("/context/list", json={"database": "acme"}, headers=seeded.headers()).json()
    [source] = body["data"]["sources"]
    assert mismatches(source, SOURCE_INFO) == []
    assert isinstance(source["timestamp"], str) and source["timestamp"].endswith("Z")
    source["timestamp"] = 1767225600.0  # the old answer
    assert any("timestamp" in m for m in mismatches(source, SOURCE_INFO))


@pytest.mark.parametrize(
    "extra",
    [
        {"collections": [f"c{i}" for i in range(101)]},
        {"collections": {"a": 0.25}},
        {"max_results": 0},
        {"alpha": 1.5},
        {"mode": "deep"},
    ],
)
def test_query_rule_violations_are_400_as_the_reference_documents(seeded: LocalApp, extra: dict[str, Any]) -> None:
    r = seeded.client.post("/query", json={"database": "acme", "query": "x", **extra}, headers=seeded.headers())
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "INVALID_INPUT"
