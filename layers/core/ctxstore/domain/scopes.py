"""Scope names, their legacy aliases, and validation of identifiers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxstore.domain.errors import ApiError, ErrorCode

DEFAULT_COLLECTION = ""

# canonical name -> legacy alias; one table drives every route.
SCOPE_ALIASES: dict[str, str] = {
    "database": "tenant_id",
    "collection": "sub_tenant_id",
    "collections": "sub_tenant_ids",
}
LEGACY_TO_CANONICAL: dict[str, str] = {legacy: canon for canon, legacy in SCOPE_ALIASES.items()}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


@dataclass(frozen=True)
class Scope:
    """Where a piece of data lives: organisation, database and collection."""

    org: str
    database: str
    collection: str = DEFAULT_COLLECTION


def validate_database_name(name: object, field: str = "database") -> str:
    if not isinstance(name, str) or not name:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{field}' is required and must be a non-empty string")
    if not _NAME.match(name):
        raise ApiError(
            ErrorCode.INVALID_PARAMETERS,
            f"'{field}' must be 1-128 characters of letters, digits, '_', '-' or '.', starting with a letter or digit",
        )
    return name


def validate_collection_name(name: object, field: str = "collection") -> str:
    if name is None or name == "":
        return DEFAULT_COLLECTION
    if not isinstance(name, str) or not _NAME.match(name):
        raise ApiError(
            ErrorCode.INVALID_PARAMETERS,
            f"'{field}' must be 1-128 characters of letters, digits, '_', '-' or '.', starting with a letter or digit",
        )
    return name
