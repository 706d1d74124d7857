"""Records: small JSON documents addressed by (org, kind, pk, sk), with conditional writes.

The shape maps one-to-one onto a DynamoDB table (partition key = org#kind#pk,
sort key = sk) and onto one SQLite table locally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class ConditionFailed(Exception):
    """A conditional write did not hold (item exists, is missing, or has another version)."""


@dataclass(frozen=True)
class Record:
    kind: str
    pk: str
    sk: str
    data: dict[str, Any]
    version: int
    expires_at: float | None = None


@dataclass(frozen=True)
class Put:
    kind: str
    pk: str
    sk: str
    data: Mapping[str, Any]  # any JSON object, typed ones too (domain/items.ItemRecord)
    if_absent: bool = False
    if_version: int | None = None  # write only if the stored version equals this
    expires_at: float | None = None


@dataclass(frozen=True)
class Delete:
    kind: str
    pk: str
    sk: str
    if_version: int | None = None
    must_exist: bool = False


@dataclass(frozen=True)
class Page:
    records: list[Record] = field(default_factory=list)
    next_after: str | None = None  # sk to pass as `after` for the next page


class RecordStore(Protocol):
    def get(self, org: str, kind: str, pk: str, sk: str) -> Record | None: ...

    def get_many(self, org: str, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Record]:
        """The live records of many (pk, sk) keys of one kind, by key; a key with none is left out."""
        ...

    def put(self, org: str, put: Put) -> Record:
        """Write; raises ConditionFailed when a condition does not hold. Returns the stored record."""
        ...

    def delete(self, org: str, kind: str, pk: str, sk: str, *, if_version: int | None = None) -> bool:
        """True if something was deleted; raises ConditionFailed on a version mismatch."""
        ...

    def query(
        self,
        org: str,
        kind: str,
        pk: str,
        *,
        sk_prefix: str = "",
        after: str | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> Page:
        """Records of one partition in sort-key order, from after `after` (exclusive)."""
        ...

    def count(self, org: str, kind: str, pk: str, *, sk_prefix: str = "") -> int: ...

    def transact(self, org: str, ops: Sequence[Put | Delete]) -> None:
        """All or nothing; raises ConditionFailed (and writes nothing) if any condition fails."""
        ...

    def delete_partitions(self, org: str, kind: str, pk_prefix: str) -> int:
        """Bulk purge of every partition of `kind` whose pk starts with pk_prefix (scope deletion)."""
        ...
