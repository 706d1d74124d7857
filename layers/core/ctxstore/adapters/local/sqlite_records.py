"""RecordStore on SQLite: one table keyed by (org, kind, pk, sk), JSON bodies, optimistic versions."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from sqlite3 import Connection

from ctxstore.adapters.local import record_tallies
from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.ports.records import ConditionFailed, Delete, Page, Put, Record

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    org TEXT NOT NULL,
    kind TEXT NOT NULL,
    pk TEXT NOT NULL,
    sk TEXT NOT NULL,
    version INTEGER NOT NULL,
    expires_at REAL,
    body TEXT NOT NULL,
    PRIMARY KEY (org, kind, pk, sk)
) WITHOUT ROWID;
"""


def _escape_like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class SqliteRecordStore:
    def __init__(self, db: SqliteDb) -> None:
        self._db = db
        db.executescript(_SCHEMA)
        with db.write() as conn:
            record_tallies.ensure(conn)

    @staticmethod
    def _row(kind: str, pk: str, row: tuple[str, int, float | None, str]) -> Record:
        sk, version, expires_at, body = row
        return Record(kind=kind, pk=pk, sk=sk, data=json.loads(body), version=version, expires_at=expires_at)

    def count_by(self, kind: str, field: str) -> dict[str, int]:
        """Records of a kind across organisations, counted by one top-level field (items by status: metrics)."""
        if (kind, field) in record_tallies.TALLIED:
            return record_tallies.counts(self._db.conn, kind, field)
        rows = self._db.conn.execute(
            "SELECT json_extract(body, ?), COUNT(*) FROM records WHERE kind=? GROUP BY 1", ("$." + field, kind)
        ).fetchall()
        return {str(v): int(n) for v, n in rows if v is not None}

    def get(self, org: str, kind: str, pk: str, sk: str) -> Record | None:
        row = self._db.conn.execute(
            "SELECT sk, version, expires_at, body FROM records WHERE org=? AND kind=? AND pk=? AND sk=?"
            " AND (expires_at IS NULL OR expires_at > ?)",
            (org, kind, pk, sk, time.time()),
        ).fetchone()
        return self._row(kind, pk, row) if row else None

    def get_many(self, org: str, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Record]:
        # One statement over the primary key (a status poll of 200 ids was 200 statements, two stores each).
        rows = self._db.conn.execute(
            "SELECT r.pk, r.sk, r.version, r.expires_at, r.body FROM json_each(?) AS k CROSS JOIN records AS r"
            " ON r.org=? AND r.kind=? AND r.pk=json_extract(k.value, '$[0]') AND r.sk=json_extract(k.value, '$[1]')"
            " WHERE r.expires_at IS NULL OR r.expires_at > ?",
            (json.dumps([list(key) for key in dict.fromkeys(keys)]), org, kind, time.time()),
        ).fetchall()
        return {(pk, row[0]): self._row(kind, pk, row) for pk, *row in rows}

    @staticmethod
    def _current_version(conn: Connection, org: str, kind: str, pk: str, sk: str) -> int | None:
        row = conn.execute(
            "SELECT version, expires_at FROM records WHERE org=? AND kind=? AND pk=? AND sk=?",
            (org, kind, pk, sk),
        ).fetchone()
        if row is None:
            return None
        version, expires_at = row
        if expires_at is not None and expires_at <= time.time():
            return None  # expired records count as absent
        return int(version)

    def _apply_put(self, conn: Connection, org: str, put: Put) -> Record:
        current = self._current_version(conn, org, put.kind, put.pk, put.sk)
        if put.if_absent and current is not None:
            raise ConditionFailed(f"{put.kind} '{put.sk}' already exists")
        if put.if_version is not None and current != put.if_version:
            raise ConditionFailed(f"{put.kind} '{put.sk}' changed (version {current}, expected {put.if_version})")
        version = (current or 0) + 1
        conn.execute(
            "INSERT INTO records (org, kind, pk, sk, version, expires_at, body) VALUES (?,?,?,?,?,?,?)"
            " ON CONFLICT (org, kind, pk, sk) DO UPDATE SET version=excluded.version,"
            " expires_at=excluded.expires_at, body=excluded.body",
            (org, put.kind, put.pk, put.sk, version, put.expires_at, json.dumps(put.data, separators=(",", ":"))),
        )
        return Record(put.kind, put.pk, put.sk, dict(put.data), version, put.expires_at)

    def _apply_delete(self, conn: Connection, org: str, op: Delete) -> bool:
        current = self._current_version(conn, org, op.kind, op.pk, op.sk)
        if op.if_version is not None and current != op.if_version:
            raise ConditionFailed(f"{op.kind} '{op.sk}' changed (version {current}, expected {op.if_version})")
        if op.must_exist and current is None:
            raise ConditionFailed(f"{op.kind} '{op.sk}' does not exist")
        cur = conn.execute("DELETE FROM records WHERE org=? AND kind=? AND pk=? AND sk=?", (org, op.kind, op.pk, op.sk))
        return cur.rowcount > 0 and current is not None

    def put(self, org: str, put: Put) -> Record:
        with self._db.write() as conn:
            return self._apply_put(conn, org, put)

    def delete(self, org: str, kind: str, pk: str, sk: str, *, if_version: int | None = None) -> bool:
        with self._db.write() as conn:
            return self._apply_delete(conn, org, Delete(kind, pk, sk, if_version=if_version))

    def transact(self, org: str, ops: Sequence[Put | Delete]) -> None:
        with self._db.write() as conn:
            for op in ops:
                if isinstance(op, Put):
                    self._apply_put(conn, org, op)
                else:
                    self._apply_delete(conn, org, op)

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
        sql = (
            "SELECT sk, version, expires_at, body FROM records WHERE org=? AND kind=? AND pk=?"
            " AND (expires_at IS NULL OR expires_at > ?)"
        )
        args: list[object] = [org, kind, pk, time.time()]
        if sk_prefix:
            sql += " AND sk LIKE ? ESCAPE '\\'"
            args.append(_escape_like(sk_prefix) + "%")
        if after is not None:
            sql += " AND sk < ?" if descending else " AND sk > ?"
            args.append(after)
        sql += " ORDER BY sk " + ("DESC" if descending else "ASC") + " LIMIT ?"
        args.append(limit + 1)
        rows = self._db.conn.execute(sql, args).fetchall()
        records = [self._row(kind, pk, r) for r in rows[:limit]]
        next_after = records[-1].sk if len(rows) > limit and records else None
        return Page(records=records, next_after=next_after)

    def count(self, org: str, kind: str, pk: str, *, sk_prefix: str = "") -> int:
        sql = "SELECT COUNT(*) FROM records WHERE org=? AND kind=? AND pk=? AND (expires_at IS NULL OR expires_at > ?)"
        args: list[object] = [org, kind, pk, time.time()]
        if sk_prefix:
            sql += " AND sk LIKE ? ESCAPE '\\'"
            args.append(_escape_like(sk_prefix) + "%")
        return int(self._db.conn.execute(sql, args).fetchone()[0])

    def delete_partitions(self, org: str, kind: str, pk_prefix: str) -> int:
        with self._db.write() as conn:
            cur = conn.execute(
                "DELETE FROM records WHERE org=? AND kind=? AND pk LIKE ? ESCAPE '\\'",
                (org, kind, _escape_like(pk_prefix) + "%"),
            )
            return cur.rowcount
