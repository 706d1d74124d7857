"""The OpenAPI document as the server really answers: envelopes, every status, real request bodies.

FastAPI alone declared a 422 `HTTPValidationError` the server never sends (validation errors are
mapped to 400/422 envelopes in http/errors.py), no failure statuses at all, and no body for the
multipart and hand-read routes, so generated clients and contract testers rejected correct answers.
This module rewrites each operation's responses after FastAPI has built the document:

* success: the envelope `{success, data, error, meta}` whose `data` is the reference OpenAPI's
  schema for the same route where it has one (reference_shapes.json: its component schemas without
  prose, under the `ref.` prefix, made by `extract_shapes`); on the routes where the reference answers a bare
  object (http/reference_shape.py) the envelope AND that object: `allOf` of the two;
* failures: the failure envelope for each status the route can answer (authentication, scope,
  limits, storage and the route's own rules; connector routes add 409 and 502);
* request bodies of `/context/ingest`, `/context/uploads` and `POST /blobs/{token}`.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ctxstore.http import reference_shape

_PARAM = re.compile(r"\{[^}]+\}")
_PROSE = frozenset({"description", "example", "examples", "summary", "title"})

NULL: dict[str, Any] = {"type": "null"}
META: dict[str, Any] = {
    "type": "object",
    "properties": {
        "request_id": {"type": "string"},
        "latency_ms": {"type": "number"},
        "api_version": {"type": "string"},
        "database": {"type": "string"},
        "collection": {"type": "string"},
        "tenant_id": {"type": "string"},
        "sub_tenant_id": {"type": "string"},
        "source_type": {"type": "string"},
        "deprecation": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["request_id", "latency_ms", "api_version"],
}
FAILURE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "success": {"type": "boolean", "enum": [False]},
        "data": NULL,
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
        "meta": {"$ref": "#/components/schemas/Meta"},
        "detail": {"type": "object"},
    },
    "required": ["success", "data", "error", "meta"],
}

STATUS_TEXT = {
    400: "Invalid parameters or input",
    401: "Missing, expired or invalid API key",
    403: "Not permitted (BYOG: missing or invalid key)",
    404: "Database, source or route not found",
    409: "Conflict with what exists",
    413: "Body or file too large",
    422: "Well-formed request failing a rule",
    429: "Rate limited (Retry-After)",
    500: "Internal error (quote meta.request_id)",
    502: "The connector's provider could not answer",
    503: "Temporarily unavailable: overloaded or storage unavailable (Retry-After)",
}

INGEST_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["knowledge", "memory"]},
        "database": {"type": "string"},
        "tenant_id": {"type": "string"},
        "collection": {"type": "string"},
        "sub_tenant_id": {"type": "string"},
        "upsert": {"type": "string", "enum": ["true", "false"]},
        "documents": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "document_metadata": {"type": "string", "contentMediaType": "application/json"},
        "app_knowledge": {"type": "string", "contentMediaType": "application/json"},
        "memories": {"type": "string", "contentMediaType": "application/json"},
        "graph_payload": {"type": "string", "contentMediaType": "application/json"},
        "uploads": {"type": "string", "contentMediaType": "application/json"},
    },
}
UPLOAD_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "filename": {"type": "string"},
        "size_bytes": {"type": "integer", "minimum": 0},
        "content_type": {"type": "string"},
    },
    "required": ["filename"],
}
BLOB_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"file": {"type": "string", "format": "binary"}},
    "required": ["file"],
}
REQUEST_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/context/ingest"): {"multipart/form-data": {"schema": INGEST_FORM}},
    ("post", "/context/uploads"): {"application/json": {"schema": UPLOAD_REQUEST}},
    ("post", "/blobs/{token}"): {"multipart/form-data": {"schema": BLOB_FORM}},
}


SHAPES_FILE = Path(__file__).with_name("reference_shapes.json")


def _strip(node: Any) -> Any:
    """A reference schema without prose, its $refs pointing at the copies under `ref.`, every typed value
    nullable: the reference (generated from Go) cannot say so, and absent values travel as null."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k in _PROSE:
                continue
            if k == "$ref" and isinstance(v, str):
                out[k] = "#/components/schemas/ref." + v.rsplit("/", 1)[-1]
            elif k == "type" and isinstance(v, str) and v != "null":
                out[k] = [v, "null"]
            else:
                out[k] = _strip(v)
        return out
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def extract_shapes(reference: dict[str, Any]) -> dict[str, Any]:
    """From the reference OpenAPI: each route's success `data` schema (the bare object where it has no envelope),
    and the component schemas they use, without prose. The result is committed as reference_shapes.json, so the
    server needs no copy of the reference at run time; a test keeps the two in sync."""
    components = reference.get("components", {}).get("schemas", {})
    schemas: dict[str, Any] = {}

    def copy_component(name: str) -> None:
        if "ref." + name in schemas:
            return
        source = components.get(name, {})
        schemas["ref." + name] = _strip(copy.deepcopy(source))
        for ref in re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(source)):
            copy_component(ref)

    routes: dict[str, Any] = {}
    for path, ops in reference.get("paths", {}).items():
        for method, op in ops.items():
            responses = op.get("responses", {})
            code = next((c for c in responses if c.startswith("2")), None)
            schema = responses.get(code, {}).get("content", {}).get("application/json", {}).get("schema", {})
            envelope = components.get(str(schema.get("$ref", "")).rsplit("/", 1)[-1], {})
            data = envelope.get("properties", {}).get("data")
            if data is None and path.startswith("/connector") and "$ref" in schema:
                data = schema  # the reference answers connector objects bare; the spec puts them in the envelope
            if data is None:
                continue
            if "$ref" in data:
                copy_component(data["$ref"].rsplit("/", 1)[-1])
            routes[f"{method} {_PARAM.sub('{}', path)}"] = {"data": _strip(copy.deepcopy(data))}
    return {"routes": dict(sorted(routes.items())), "schemas": dict(sorted(schemas.items()))}


@cache
def _shapes() -> dict[str, Any]:
    return dict(json.loads(SHAPES_FILE.read_text()))


def _reference_data_schema(method: str, path: str, schemas: dict[str, Any]) -> dict[str, Any]:
    """The schema of `data` from the reference, or {}."""
    shapes = _shapes()
    route = shapes["routes"].get(f"{method} {_PARAM.sub('{}', path)}")
    if route is None:
        return {}
    for ref in re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(route["data"])):
        _add_schema(ref, shapes["schemas"], schemas)
    return copy.deepcopy(route["data"])


def _add_schema(name: str, source: dict[str, Any], into: dict[str, Any]) -> None:
    if name in into:
        return
    into[name] = copy.deepcopy(source.get(name, {}))
    for ref in re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(into[name])):
        _add_schema(ref, source, into)


def _failure_statuses(method: str, path: str) -> list[int]:
    if path == "/health":
        return [503]
    writes = method in ("post", "put", "patch", "delete")
    if path.startswith("/blobs/"):
        return sorted({400, 403, 404, 500, 503} | ({413} if writes else set()))
    codes = {400, 404, 429, 500, 503}
    codes |= {403} if path.startswith("/byog/") else {401, 403}
    if path.startswith("/connector"):
        codes |= {409, 502}  # a sync already running, a taken account scope; the provider could not answer
    if writes:
        codes |= {409, 413}
        if path != "/query":  # /query answers rule violations with 400 (docs/api.md)
            codes.add(422)
    return sorted(codes)


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "success": {"type": "boolean", "enum": [True]},
            "data": data,
            "error": NULL,
            "meta": {"$ref": "#/components/schemas/Meta"},
        },
        "required": ["success", "data", "error", "meta"],
    }


def _rewrite(doc: dict[str, Any]) -> dict[str, Any]:
    schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas["Meta"] = META
    schemas["Failure"] = FAILURE
    doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            responses = op.get("responses", {})
            success = next((c for c in responses if c.startswith("2")), "200")
            if path == "/health":
                content: dict[str, Any] = {"application/json": {"schema": {"type": "object"}}}
            elif method == "get" and path == "/blobs/{token}":
                content = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
            else:
                data = _reference_data_schema(method, path, schemas)
                schema = _envelope(data)
                if reference_shape.answers_bare((method.upper(), path)):
                    schema = {"allOf": [schema, data]}
                content = {"application/json": {"schema": schema}}
            new: dict[str, Any] = {
                success: {"description": "Success", **({} if success == "204" else {"content": content})}
            }
            for status in _failure_statuses(method, path):
                new[str(status)] = {
                    "description": STATUS_TEXT[status],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Failure"}}},
                }
            op["responses"] = new
            if (method, path) in REQUEST_BODIES:
                op["requestBody"] = {"required": True, "content": REQUEST_BODIES[(method, path)]}
            if path != "/health" and not path.startswith("/blobs/"):
                op["security"] = [{"bearer": []}]
    return doc


# The AWS API's document (every router API Gateway routes), written by scripts/export-openapi.py.
AWS_DOCUMENT = Path(__file__).with_name("openapi_aws.json")


def install_document(app: FastAPI, path: Path) -> None:
    """Serve a prepared document at /openapi.json (read once, on first request)."""
    loaded: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if not loaded:
            loaded.append(json.loads(path.read_text(encoding="utf-8")))
            app.openapi_schema = loaded[0]
        return loaded[0]

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI) -> None:
    """Serve the rewritten document at /openapi.json (built once, on first request)."""
    build = app.openapi
    built: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if not built:
            built.append(_rewrite(copy.deepcopy(build())))
            app.openapi_schema = built[0]
        return built[0]

    app.openapi = openapi  # type: ignore[method-assign]
