"""An in-memory RecordStore with the port's semantics: versions, conditional writes, all-or-nothing
transactions, expiry, sort-key order and paging, org isolation.

Bodies are kept as JSON text, as SQLite and DynamoDB keep them: a caller that mutates a dict after a put
or a get does not change the store, and data JSON cannot hold is refused at the write. Sort keys order by
code point, which is the UTF-8 byte order both real stores use.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ctxstore.ports.clock import Clock
from ctxstore.ports.records import ConditionFailed, Delete, Page, Put, Record
from tests.fakes.ports.clock import RealClock

_Partition = tuple[str, str, str]  # org, kind, pk


@dataclass(frozen=True)
class _Row:
    version: int
    expires_at: float | None
    body: str


class InMemoryRecordStore:
    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or RealClock()
        self._lock = threading.RLock()
        self._rows: dict[_Partition, dict[str, _Row]] = {}
        self._sks: dict[_Partition, list[str]] = {}  # each partition's sort keys, kept sorted

    # ---- reads ----------------------------------------------------------------------------
    def _live(self, row: _Row | None) -> _Row | None:
        if row is None or (row.expires_at is not None and row.expires_at <= self._clock.now()):
            return None  # expired records are absent to every read and condition
        return row

    def get(self, org: str, kind: str, pk: str, sk: str) -> Record | None:
        with self._lock:
            row = self._live(self._rows.get((org, kind, pk), {}).get(sk))
        return _record(kind, pk, sk, row) if row else None

    def get_many(self, org: str, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Record]:
        found = {(pk, sk): self.get(org, kind, pk, sk) for pk, sk in keys}
        return {key: rec for key, rec in found.items() if rec is not None}

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
        part = (org, kind, pk)
        with self._lock:
            rows = self._rows.get(part, {})
            sks = [sk for sk in self._sks.get(part, []) if sk.startswith(sk_prefix) and self._live(rows[sk])]
            if descending:
                sks.reverse()
            if after is not None:
                sks = [sk for sk in sks if (sk < after if descending else sk > after)]
            records = [_record(kind, pk, sk, rows[sk]) for sk in sks[:limit]]
        next_after = records[-1].sk if len(sks) > limit and records else None
        return Page(records=records, next_after=next_after)

    def count(self, org: str, kind: str, pk: str, *, sk_prefix: str = "") -> int:
        with self._lock:
            rows = self._rows.get((org, kind, pk), {})
            return sum(1 for sk, row in rows.items() if sk.startswith(sk_prefix) and self._live(row))

    # ---- writes ---------------------------------------------------------------------------
    def put(self, org: str, put: Put) -> Record:
        with self._lock:
            return self._apply_put(org, put)

    def delete(self, org: str, kind: str, pk: str, sk: str, *, if_version: int | None = None) -> bool:
        with self._lock:
            return self._apply_delete(org, Delete(kind, pk, sk, if_version=if_version))

    def transact(self, org: str, ops: Sequence[Put | Delete]) -> None:
        with self._lock:
            saved = {part: dict(rows) for part, rows in self._rows.items()}
            saved_sks = {part: list(sks) for part, sks in self._sks.items()}
            try:
                for op in ops:
                    if isinstance(op, Put):
                        self._apply_put(org, op)
                    else:
                        self._apply_delete(org, op)
            except BaseException:
                self._rows, self._sks = saved, saved_sks  # all or nothing
                raise

    def delete_partitions(self, org: str, kind: str, pk_prefix: str) -> int:
        with self._lock:
            parts = [p for p in self._rows if p[0] == org and p[1] == kind and p[2].startswith(pk_prefix)]
            removed = 0
            for part in parts:
                removed += len(self._rows.pop(part))
                self._sks.pop(part, None)
            return removed

    def _current(self, org: str, kind: str, pk: str, sk: str) -> int | None:
        row = self._live(self._rows.get((org, kind, pk), {}).get(sk))
        return row.version if row else None

    def _apply_put(self, org: str, put: Put) -> Record:
        current = self._current(org, put.kind, put.pk, put.sk)
        if put.if_absent and current is not None:
            raise ConditionFailed(f"{put.kind} '{put.sk}' already exists")
        if put.if_version is not None and current != put.if_version:
            raise ConditionFailed(f"{put.kind} '{put.sk}' changed (version {current}, expected {put.if_version})")
        body = json.dumps(put.data, separators=(",", ":"))  # raises for what JSON cannot hold
        part = (org, put.kind, put.pk)
        rows = self._rows.setdefault(part, {})
        if put.sk not in rows:
            bisect.insort(self._sks.setdefault(part, []), put.sk)
        row = _Row((current or 0) + 1, put.expires_at, body)
        rows[put.sk] = row
        return _record(put.kind, put.pk, put.sk, row)

    def _apply_delete(self, org: str, op: Delete) -> bool:
        current = self._current(org, op.kind, op.pk, op.sk)
        if op.if_version is not None and current != op.if_version:
            raise ConditionFailed(f"{op.kind} '{op.sk}' changed (version {current}, expected {op.if_version})")
        if op.must_exist and current is None:
            raise ConditionFailed(f"{op.kind} '{op.sk}' does not exist")
        part = (org, op.kind, op.pk)
        rows = self._rows.get(part, {})
        if op.sk in rows:
            del rows[op.sk]
            self._sks[part].remove(op.sk)
        return current is not None


def _record(kind: str, pk: str, sk: str, row: _Row) -> Record:
    return Record(kind=kind, pk=pk, sk=sk, data=json.loads(row.body), version=row.version, expires_at=row.expires_at)
