"""The SQLite search index's schema and the SQL it builds: filters, vector blobs, chunk rows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from sqlite3 import Connection
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ctxstore.ports.search_index import ChunkDoc, SearchFilter, Store

Vector = npt.NDArray[np.float32]

SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    org TEXT NOT NULL,
    database TEXT NOT NULL,
    collection TEXT NOT NULL,
    store TEXT NOT NULL,
    item_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL DEFAULT '',
    scope TEXT NOT NULL,
    source_type TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    additional_metadata TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL DEFAULT 0,
    position INTEGER NOT NULL DEFAULT 0,
    dim INTEGER,
    vector BLOB,
    kw_scope INTEGER,
    kw_title TEXT,
    kw_text TEXT,
    kw_len INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_by_id ON chunks (org, chunk_id);
CREATE INDEX IF NOT EXISTS chunks_by_item ON chunks (org, database, store, collection, item_id);
-- What a vector hit needs of its row, by row id, without reading the row (its vector and texts make it ~4 KB,
-- a page each): at 1M chunks 100 hits read 100 pages the OS no longer caches, ~10 ms (docs/benchmarks.md).
CREATE INDEX IF NOT EXISTS chunks_hits ON chunks (id, chunk_id, item_id, collection);
CREATE TABLE IF NOT EXISTS kw_scopes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    org TEXT NOT NULL,
    database TEXT NOT NULL,
    store TEXT NOT NULL,
    collection TEXT NOT NULL,
    docs INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    UNIQUE (org, database, store, collection)
);
CREATE TABLE IF NOT EXISTS vector_scopes (
    org TEXT NOT NULL,
    database TEXT NOT NULL,
    store TEXT NOT NULL,
    generation INTEGER NOT NULL,
    PRIMARY KEY (org, database, store)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS databases (
    org TEXT NOT NULL,
    database TEXT NOT NULL,
    PRIMARY KEY (org, database)
) WITHOUT ROWID;
"""

KW_SCHEMA = (
    "CREATE VIRTUAL TABLE kw_fts USING fts5(kw_title, kw_text, content='chunks', content_rowid='id', tokenize='ascii')",
)
# The index writes its FTS5 rows itself, one statement per transaction, rather than by triggers on `chunks`: a
# trigger's statement savepoint made FTS5 flush its pending rows as a segment of their own for every chunk row
# (an upsert of 10 chunks: 10 segments), and each token of a query probes every segment.
KW_INSERT = (
    "INSERT INTO kw_fts (rowid, kw_title, kw_text)"
    " SELECT id, kw_title, kw_text FROM chunks WHERE id IN (SELECT value FROM json_each(?))"
)
# External content: FTS5 removes a row's tokens given the values it indexed (DELETE ... RETURNING gives them).
KW_DELETE = (
    "INSERT INTO kw_fts (kw_fts, rowid, kw_title, kw_text) SELECT 'delete', json_extract(value, '$[0]'),"
    " json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?)"
)
KW_OLD_TRIGGERS = ("DROP TRIGGER IF EXISTS kw_ai", "DROP TRIGGER IF EXISTS kw_ad")  # files written before


def insert_chunk(
    conn: Connection,
    org: str,
    c: ChunkDoc,
    dim: int | None,
    blob: bytes | None,
    sid: int,
    keywords: tuple[str, str, int],  # the scoped title and text stems, and their length
) -> int:
    """One chunk row; answers its row id (its FTS5 row is written with the transaction's others: KW_INSERT)."""
    meta = json.dumps(c.metadata, separators=(",", ":"))
    extra = json.dumps(c.additional_metadata, separators=(",", ":"))
    (rowid,) = conn.execute(
        "INSERT INTO chunks (org, database, collection, store, item_id, chunk_id, title, text, scope, source_type,"
        " metadata, additional_metadata, created_at, position, dim, vector, kw_scope, kw_title, kw_text, kw_len)"
        " VALUES (?,?,?,?,?,?,?,?,'',?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
        (
            org,
            c.database,
            c.collection,
            c.store,
            c.item_id,
            c.chunk_id,
            c.title,
            c.text,
            c.source_type,
            meta,
            extra,
            c.created_at,
            c.position,
            dim,
            blob,
            sid,
            *keywords,
        ),
    ).fetchone()
    return int(rowid)


def vector_blob(vector: Vector | None) -> tuple[int | None, bytes | None]:
    if vector is None:
        return None, None
    arr = np.asarray(vector, dtype="<f4")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"a chunk vector must be one-dimensional and non-empty, got shape {arr.shape}")
    return int(arr.size), arr.tobytes()


def filter_values(value: Any) -> list[Any]:
    values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
    for v in values:
        if isinstance(v, dict | list | tuple):
            raise ValueError("metadata filter values must be scalars or lists of scalars")
    return values


def filter_sql(flt: SearchFilter, params: list[Any]) -> str:
    clauses: list[str] = []
    if flt.collections:
        clauses.append("c.collection IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(flt.collections)))
    if flt.item_ids is not None:
        clauses.append("c.item_id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(flt.item_ids)))
    for column, conditions in (("metadata", flt.metadata), ("additional_metadata", flt.additional_metadata)):
        for key, value in conditions.items():
            sub: list[Any] = []
            clause = metadata_clause(column, key, value, sub)
            clauses.append(clause)
            params.extend(sub)
    return "".join(f" AND {c}" for c in clauses)


CHUNK_COLUMNS = (
    "chunk_id, item_id, database, collection, store, text, vector, title, source_type,"
    " created_at, metadata, additional_metadata, position"
)


def chunk_doc(r: Sequence[Any]) -> ChunkDoc:
    return ChunkDoc(
        chunk_id=r[0],
        item_id=r[1],
        database=r[2],
        collection=r[3],
        store=cast(Store, r[4]),
        text=r[5],
        vector=None if r[6] is None else np.frombuffer(r[6], dtype="<f4").astype(np.float32),
        title=r[7],
        source_type=r[8],
        created_at=float(r[9]),
        metadata=json.loads(r[10]),
        additional_metadata=json.loads(r[11]),
        position=int(r[12]),
    )


def metadata_clause(column: str, key: str, value: Any, params: list[Any]) -> str:
    """Exact match on a top-level key; a list filter matches any value, a stored list matches any element."""
    values = filter_values(value)
    wants_null = any(v is None for v in values)
    scalars = [int(v) if isinstance(v, bool) else v for v in values if v is not None]
    tests: list[str] = []
    params.append(key)
    if scalars:
        tests.append("(e.type NOT IN ('object', 'array', 'null') AND e.value IN (SELECT value FROM json_each(?)))")
        params.append(json.dumps(scalars))
    if wants_null:
        tests.append("e.type = 'null'")
    if not tests:
        params.pop()
        return "0"
    return (
        f"EXISTS (SELECT 1 FROM json_each(c.{column}) AS m,"
        " json_each(CASE m.type WHEN 'array' THEN m.value ELSE json_array(m.value) END) AS e"
        f" WHERE m.key = ? AND ({' OR '.join(tests)}))"
    )


def scope_id(conn: Connection, org: str, database: str, store: str, collection: str) -> int:
    key = (org, database, store, collection)
    row = conn.execute(
        "SELECT id FROM kw_scopes WHERE org=? AND database=? AND store=? AND collection=?", key
    ).fetchone()
    if row is not None:
        return int(row[0])
    (sid,) = conn.execute(
        "INSERT INTO kw_scopes (org, database, store, collection) VALUES (?,?,?,?) RETURNING id", key
    ).fetchone()
    return int(sid)


def count_scopes(conn: Connection, change: dict[int, tuple[int, int]]) -> None:
    """Documents and tokens per collection, in the write's own transaction (the bm25 statistics)."""
    conn.executemany(
        "UPDATE kw_scopes SET docs = docs + ?, tokens = tokens + ? WHERE id = ?",
        [(n, t, sid) for sid, (n, t) in change.items() if n or t],
    )
