"""POST /query's request is defined once (services/query/request.QueryBody): the route reads that model, the
OpenAPI document is generated from it, and the service's rules build the QueryRequest from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter
from pydantic import Field, StrictStr

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.http import factory, openapi_doc
from ctxstore.http.routers import query as query_router
from ctxstore.services.query import request
from ctxstore.services.query.request import QueryBody, build_request, query_body

ROOT = Path(__file__).resolve().parents[3]
CHOICES = {"type": request.TYPES, "query_by": request.QUERY_BY, "operator": request.OPERATORS, "mode": request.MODES}


def _document(router: APIRouter) -> dict[str, Any]:
    app = factory.routed_app([router])
    openapi_doc.install(app)
    return app.openapi()


def _body_schema(doc: dict[str, Any]) -> dict[str, Any]:
    ref = doc["paths"]["/query"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema: dict[str, Any] = doc["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return schema


def _enum(prop: dict[str, Any]) -> list[str]:
    return next(alt["enum"] for alt in prop["anyOf"] if "enum" in alt)


def _check_documents(model: type[QueryBody], schema: dict[str, Any]) -> None:
    assert set(schema["properties"]) == set(model.model_fields)
    assert schema["required"] == [name for name, f in model.model_fields.items() if f.is_required()]
    for name, f in model.model_fields.items():
        prop = schema["properties"][name]
        assert prop["description"] == f.description, name
        if not f.is_required():  # FastAPI leaves a null default out
            assert prop.get("default") == f.default, name


def test_the_served_document_describes_every_field_of_the_model() -> None:
    schema = _body_schema(_document(query_router.router))
    _check_documents(QueryBody, schema)
    for name, choices in CHOICES.items():
        assert _enum(schema["properties"][name]) == list(choices), name
    assert _enum(schema["properties"]["alpha"]) == ["auto"]


def test_the_aws_document_describes_the_same_model() -> None:
    """The committed AWS document (scripts/export-openapi.py) holds the same request schema."""
    committed = json.loads((ROOT / "layers/core/ctxstore/http/openapi_aws.json").read_text())
    assert _body_schema(committed) == _body_schema(_document(query_router.router))


class WiderBody(QueryBody):
    probe: StrictStr | None = Field(None, description="A knob added to the body.")


def test_a_field_added_to_the_model_shows_in_the_document() -> None:
    router = APIRouter()

    @router.post("/query")
    def route(body: WiderBody) -> None: ...

    schema = _body_schema(_document(router))
    assert "probe" in schema["properties"] and "probe" not in QueryBody.model_fields
    _check_documents(WiderBody, schema)


def test_choices_outside_the_documented_ones_stay_rule_violations() -> None:
    """The document lists the choices, the model still reads any string: the rule answers INVALID_INPUT."""
    body = QueryBody.model_validate({"database": "d", "query": "q", "mode": "slow"})
    with pytest.raises(ApiError) as err:
        build_request(body, [])
    assert err.value.code is ErrorCode.INVALID_INPUT
    assert err.value.message == "'mode' must be one of fast, thinking, auto; got 'slow'"


def test_defaults_and_nulls_build_the_same_request() -> None:
    sent = {"database": "d", "query": "q"}
    nulls = dict(sent, **{name: None for name in QueryBody.model_fields if name not in sent})
    built = build_request(QueryBody.model_validate(sent), [])
    assert build_request(QueryBody.model_validate(nulls), []) == built
    assert build_request(query_body(sent), []) == built  # in-process JSON (MCP, console)
    assert (built.type, built.mode, built.query_by, built.operator, built.alpha) == (
        "knowledge",
        "auto",
        "hybrid",
        "or",
        None,
    )
    assert (built.max_results, built.graph_context, built.forceful_relations) == (10, True, True)
