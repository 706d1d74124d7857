"""Connector forms: a provider's credential schema as form fields, and the forms back into request bodies.

Pure functions (no services): the Connectors pages render `credential_fields` and turn what was posted into
the same bodies the `/connectors*` routes take, so the connector service checks them exactly as for the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxstore.domain.errors import ApiError, ErrorCode

CRED_PREFIX = "cred."  # form names of credential inputs, apart from the connector's own fields
MAX_FORM_RESOURCES = 1000  # the service's own cap on one configure


@dataclass(frozen=True)
class CredentialField:
    name: str
    kind: str  # "secret", "text" or "number"
    description: str
    required: bool

    @property
    def input_name(self) -> str:
        return CRED_PREFIX + self.name


def _variant(schema: dict[str, Any], auth_type: str) -> dict[str, Any]:
    variants = schema.get("oneOf")
    if not isinstance(variants, list):
        return schema
    for v in variants:
        if isinstance(v, dict) and v.get("title") == auth_type:
            return v
    return {}


def credential_fields(schema: dict[str, Any], auth_type: str) -> list[CredentialField]:
    """The inputs for one auth type. Every string is a secret (a password input, never filled back) unless
    it only names something (`*_id`); an alias of another field is left out (one input per value)."""
    variant = _variant(schema, auth_type)
    props = variant.get("properties") or {}
    required = set(variant.get("required") or [])
    out: list[CredentialField] = []
    for name, spec in props.items():
        spec = spec if isinstance(spec, dict) else {}
        description = str(spec.get("description") or "")
        if description.startswith("alias of "):
            continue
        if spec.get("type") in ("number", "integer"):
            kind = "number"
        elif name.endswith("_id"):
            kind = "text"
        else:
            kind = "secret"
        out.append(CredentialField(str(name), kind, description, name in required))
    return out


def credentials_from_form(form: Any, fields: list[CredentialField]) -> dict[str, Any]:
    """The credential values typed in; empty inputs are left out (on update: the stored value is kept)."""
    out: dict[str, Any] = {}
    for f in fields:
        raw = form.get(f.input_name)
        value = raw.strip() if isinstance(raw, str) else ""
        if not value:
            continue
        if f.kind == "number":
            try:
                out[f.name] = float(value) if "." in value or "e" in value.lower() else int(value)
            except ValueError:
                raise ApiError(ErrorCode.INVALID_PARAMETERS, f"credentials: '{f.name}' must be a number") from None
        else:
            out[f.name] = value
    return out


def optional_int(raw: str, name: str) -> int | None:
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{name}' must be a whole number") from None


def configure_body(form: Any) -> dict[str, Any]:
    """The discover page's form as a configure body: the ticked resources, each with its collection and
    sync mode, and lookback_days. Rows are numbered (`rid.N`), so any resource id survives the form."""
    chosen = [v for v in form.getlist("sel") if isinstance(v, str) and v.isdigit()]
    if len(chosen) > MAX_FORM_RESOURCES:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"at most {MAX_FORM_RESOURCES} resources per configure")
    resources: list[dict[str, Any]] = []
    for i in chosen:
        resource_id = form.get(f"rid.{i}")
        if not isinstance(resource_id, str) or not resource_id:
            continue
        r: dict[str, Any] = {"resource_id": resource_id}
        collection = form.get(f"col.{i}")
        if isinstance(collection, str) and collection.strip():
            r["collection"] = collection.strip()
        mode = form.get(f"mode.{i}")
        if isinstance(mode, str) and mode:
            r["sync_mode"] = mode
        resources.append(r)
    if not resources:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, "tick at least one resource to sync")
    body: dict[str, Any] = {"resources": resources}
    lookback = form.get("lookback_days")
    days = optional_int(lookback.strip() if isinstance(lookback, str) else "", "lookback_days")
    if days is not None:
        body["lookback_days"] = days
    return body


def duration(seconds: int | float | None) -> str:
    """300 -> '5 min', 3600 -> '1 h', 604800 -> '7 days' (the largest unit that divides it; else seconds)."""
    if seconds is None:
        return ""
    s = int(seconds)
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= size and s % size == 0:
            n = s // size
            return f"{n} {'day' if unit == 'days' and n == 1 else unit}"
    return f"{s} s"
