"""The database metadata schema: typed, filterable fields declared per database.

Field shape follows the reference (`tenants.CustomPropertyDefinition`); only
declared keys are indexed for filtering, and only `enable_match` ones can be
used in exact-match filters.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from ctxstore.domain.errors import ApiError, ErrorCode

MAX_FIELDS = 64
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Reserved: these names are top-level keys of filters or of stored items.
RESERVED_NAMES = frozenset({"additional_metadata", "document_metadata", "id", "title", "acl"})


class DataType(StrEnum):
    BOOL = "BOOL"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    VARCHAR = "VARCHAR"
    JSON = "JSON"
    ARRAY = "ARRAY"


_INT_BITS = {DataType.INT8: 8, DataType.INT16: 16, DataType.INT32: 32, DataType.INT64: 64}
DEFAULT_VARCHAR_LENGTH = 256
MAX_VARCHAR_LENGTH = 65535


@dataclass(frozen=True)
class FieldDef:
    name: str
    data_type: DataType
    enable_match: bool = True
    enable_dense_embedding: bool = False
    enable_sparse_embedding: bool = False
    max_length: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["data_type"] = self.data_type.value
        return out


def _fail(message: str) -> ApiError:
    return ApiError(ErrorCode.VALIDATION_ERROR, message)


def parse_field(raw: object, where: str) -> FieldDef:
    if not isinstance(raw, dict):
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"{where} must be an object")
    allowed = {"name", "data_type", "enable_match", "enable_dense_embedding", "enable_sparse_embedding", "max_length"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"{where}: unknown key '{unknown[0]}'")
    name = raw.get("name")
    if not isinstance(name, str) or not _FIELD_NAME.match(name):
        raise _fail(f"{where}.name must match [A-Za-z_][A-Za-z0-9_]{{0,63}}")
    if name in RESERVED_NAMES:
        raise _fail(f"{where}.name '{name}' is reserved")
    dt_raw = raw.get("data_type", "VARCHAR")
    try:
        data_type = DataType(str(dt_raw).upper())
    except ValueError:
        raise _fail(f"{where}.data_type '{dt_raw}' is not one of {', '.join(t.value for t in DataType)}") from None
    flags: dict[str, bool] = {}
    for flag, default in (
        ("enable_match", True),
        ("enable_dense_embedding", False),
        ("enable_sparse_embedding", False),
    ):
        value = raw.get(flag, default)
        if not isinstance(value, bool):
            raise ApiError(ErrorCode.INVALID_PARAMETERS, f"{where}.{flag} must be a boolean")
        flags[flag] = value
    max_length = raw.get("max_length")
    if data_type is DataType.VARCHAR:
        if max_length is None:
            max_length = DEFAULT_VARCHAR_LENGTH
        if (
            not isinstance(max_length, int)
            or isinstance(max_length, bool)
            or not (1 <= max_length <= MAX_VARCHAR_LENGTH)
        ):
            raise _fail(f"{where}.max_length must be an integer from 1 to {MAX_VARCHAR_LENGTH}")
    elif max_length is not None:
        raise _fail(f"{where}.max_length applies only to VARCHAR fields")
    return FieldDef(name=name, data_type=data_type, max_length=max_length, **flags)


def parse_schema(raw: object, field: str) -> list[FieldDef]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{field}' must be an array of field definitions")
    fields = [parse_field(item, f"{field}[{i}]") for i, item in enumerate(raw)]
    seen: set[str] = set()
    for f in fields:
        if f.name in seen:
            raise _fail(f"'{field}' declares '{f.name}' twice")
        seen.add(f.name)
    if len(fields) > MAX_FIELDS:
        raise _fail(f"'{field}' may declare at most {MAX_FIELDS} fields")
    return fields


def merge_additive(existing: list[FieldDef], added: list[FieldDef]) -> list[FieldDef]:
    """Additive schema update: new names only; existing fields cannot be retyped or removed."""
    names = {f.name for f in existing}
    for f in added:
        if f.name in names:
            raise ApiError(ErrorCode.CONFLICT, f"metadata field '{f.name}' already exists and cannot change")
    merged = [*existing, *added]
    if len(merged) > MAX_FIELDS:
        raise _fail(f"a database may declare at most {MAX_FIELDS} metadata fields")
    return merged


def _check_value(fd: FieldDef, value: object, where: str) -> None:
    dt = fd.data_type
    if dt is DataType.BOOL:
        ok = isinstance(value, bool)
    elif dt in _INT_BITS:
        bits = _INT_BITS[dt]
        ok = isinstance(value, int) and not isinstance(value, bool) and (-(2 ** (bits - 1)) <= value < 2 ** (bits - 1))
    elif dt in (DataType.FLOAT, DataType.DOUBLE):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif dt is DataType.VARCHAR:
        ok = isinstance(value, str) and len(value.encode()) <= (fd.max_length or DEFAULT_VARCHAR_LENGTH)
    elif dt is DataType.ARRAY:
        ok = isinstance(value, list)
    else:  # JSON accepts any JSON value
        ok = True
    if not ok:
        raise _fail(
            f"{where}.{fd.name}: value {value!r} does not fit type {dt.value}"
            + (f" (max_length {fd.max_length})" if dt is DataType.VARCHAR else "")
        )


def validate_metadata(schema: list[FieldDef], metadata: object, where: str = "metadata") -> dict[str, Any]:
    """Check item metadata against the schema.

    With no declared field every key is accepted (and none is filterable); once a
    schema declares any key, an undeclared key is a 400 naming it.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{where}' must be an object")
    by_name = {f.name: f for f in schema}
    for key, value in metadata.items():
        fd = by_name.get(key)
        if fd is None:
            if schema:
                raise ApiError(
                    ErrorCode.INVALID_PARAMETERS,
                    f"'{where}' key '{key}' is not declared in the database metadata schema",
                )
            continue
        if value is not None:
            _check_value(fd, value, where)
    return dict(metadata)
