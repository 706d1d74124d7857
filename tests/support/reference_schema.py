"""Check a live response against a schema of the hosted service's reference OpenAPI (facts, not prose).

Lenient where the reference cannot be strict (null for any field, int where a number is declared, keys
the reference does not name), strict where generated clients break: a declared field of another JSON
type, or a required field missing.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "reference-openapi-v2.json"


@cache
def reference() -> dict[str, Any]:
    return dict(json.loads(REFERENCE.read_text()))


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = reference()["components"]["schemas"][name]
    return schema


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def mismatches(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    schema = _resolve(schema)
    if value is None:
        return []
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            options = [mismatches(value, s, path) for s in schema[key]]
            if key == "allOf":
                return [m for o in options for m in o]
            return [] if any(not o for o in options) else options[0]
    kind = schema.get("type")
    if kind in _TYPES:
        ok = isinstance(value, _TYPES[kind]) and not (kind in ("integer", "number") and isinstance(value, bool))
        if not ok:
            return [f"{path}: {type(value).__name__} where the reference has {kind}"]
    out: list[str] = []
    if isinstance(value, dict):
        props = dict(schema.get("properties") or {})
        if "inner" in props and "inner" not in value:
            # The reference documents Go's embedded structs as a field named `inner`; on the wire they are
            # flattened into the enclosing object, so their fields are checked in place.
            out += mismatches(value, props.pop("inner"), path)
        for name in schema.get("required") or []:
            if name not in value:
                out.append(f"{path}.{name}: required by the reference, missing")
        for name, sub in props.items():
            if name in value:
                out += mismatches(value[name], sub, f"{path}.{name}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, v in value.items():
                if name not in props:
                    out += mismatches(v, extra, f"{path}.{name}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value[:20]):
            out += mismatches(v, schema["items"], f"{path}[{i}]")
    return out


def success_schema(method: str, path: str) -> dict[str, Any]:
    op = reference()["paths"][path][method.lower()]
    code = next(c for c in op["responses"] if c.startswith("2"))
    return dict(op["responses"][code]["content"]["application/json"]["schema"])


def _ref_name(schema: dict[str, Any]) -> str:
    return str(schema["$ref"]).rsplit("/", 1)[-1] if "$ref" in schema else ""


def missing_fields(value: Any, schema: dict[str, Any], path: str = "$", owner: str = "") -> list[tuple[str, str]]:
    """(schema name, path) of every field the reference names and the answer lacks, at any depth.

    The strict half of the check: a field ctxstore renamed or nested elsewhere is missing where the generated
    client reads it. Arrays are checked item by item (the first 20); a null value counts as present.
    """
    while "$ref" in schema:
        owner = _ref_name(schema)
        schema = reference()["components"]["schemas"][owner]
    if value is None:
        return []
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            options = [missing_fields(value, s, path, owner) for s in schema[key]]
            if key == "allOf":
                return [m for o in options for m in o]
            return [] if any(not o for o in options) else options[0]
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        props = dict(schema.get("properties") or {})
        if "inner" in props and "inner" not in value:
            out += missing_fields(value, props.pop("inner"), path, owner)
        for name, sub in props.items():
            if name in value:
                out += missing_fields(value[name], sub, f"{path}.{name}", owner)
            else:
                out.append((owner, f"{path}.{name}"))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value[:20]):
            out += missing_fields(v, schema["items"], f"{path}[{i}]", owner)
    return out
