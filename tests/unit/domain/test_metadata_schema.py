from __future__ import annotations

import pytest

from ctxstore.domain import metadata_schema as ms
from ctxstore.domain.errors import ApiError, ErrorCode

SCHEMA = ms.parse_schema(
    [
        {"name": "region", "data_type": "VARCHAR", "max_length": 5},
        {"name": "n8", "data_type": "INT8"},
        {"name": "n64", "data_type": "INT64"},
        {"name": "f", "data_type": "FLOAT"},
        {"name": "b", "data_type": "BOOL"},
        {"name": "tags", "data_type": "ARRAY"},
        {"name": "blob", "data_type": "JSON"},
    ],
    "schema",
)


def test_valid_metadata_passes() -> None:
    md = {"region": "eu", "n8": -128, "n64": 2**63 - 1, "f": 1, "b": False, "tags": ["a"], "blob": {"x": [1]}}
    assert ms.validate_metadata(SCHEMA, md) == md
    assert ms.validate_metadata(SCHEMA, None) == {}
    assert ms.validate_metadata(SCHEMA, {"region": None}) == {"region": None}


@pytest.mark.parametrize(
    ("md", "word"),
    [
        ({"region": "toolong"}, "max_length"),
        ({"region": 5}, "VARCHAR"),
        ({"n8": 128}, "INT8"),
        ({"n8": True}, "INT8"),
        ({"n64": 2**63}, "INT64"),
        ({"f": "1.0"}, "FLOAT"),
        ({"b": 1}, "BOOL"),
        ({"tags": "a"}, "ARRAY"),
    ],
)
def test_type_mismatches_are_422_naming_the_key(md: dict[str, object], word: str) -> None:
    with pytest.raises(ApiError) as exc:
        ms.validate_metadata(SCHEMA, md)
    assert exc.value.code is ErrorCode.VALIDATION_ERROR and exc.value.status == 422
    assert next(iter(md)) in exc.value.message and word in exc.value.message


def test_undeclared_key_is_400_once_a_schema_exists() -> None:
    with pytest.raises(ApiError) as exc:
        ms.validate_metadata(SCHEMA, {"colour": "red"})
    assert exc.value.status == 400 and "colour" in exc.value.message
    assert ms.validate_metadata([], {"colour": "red"}) == {"colour": "red"}


def test_metadata_must_be_an_object() -> None:
    with pytest.raises(ApiError) as exc:
        ms.validate_metadata(SCHEMA, ["x"])
    assert exc.value.status == 400


def test_varchar_length_counts_bytes() -> None:
    with pytest.raises(ApiError):
        ms.validate_metadata(SCHEMA, {"region": "ééé"})  # 6 bytes > 5


def test_merge_is_additive_only() -> None:
    added = ms.parse_schema([{"name": "new", "data_type": "BOOL"}], "add_fields")
    assert [f.name for f in ms.merge_additive(SCHEMA, added)][-1] == "new"
    with pytest.raises(ApiError) as exc:
        ms.merge_additive(SCHEMA, ms.parse_schema([{"name": "region", "data_type": "VARCHAR"}], "x"))
    assert exc.value.status == 409


def test_defaults() -> None:
    [f] = ms.parse_schema([{"name": "x"}], "s")
    assert f.data_type is ms.DataType.VARCHAR and f.max_length == 256 and f.enable_match is True
