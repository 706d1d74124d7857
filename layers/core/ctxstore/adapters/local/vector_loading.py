"""A scope's vectors into memory: its snapshot as it is, its snapshot caught up with SQLite, or SQLite alone.

A snapshot older than the scope (writes after it, then `kill -9`) is still most of the answer: chunk rows are
never updated in place (a re-ingest deletes and inserts) and their ids only grow (AUTOINCREMENT), so the rows
written since are exactly those past the snapshot's highest id, and the rows deleted since are the snapshot's ids
no longer in the table. The first is a range read on the table; the second one pass over the scope's index
entries (1.4 s at 1M chunks here, against ~25 s to read every vector).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from sqlite3 import Connection, Cursor

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local import vector_snapshot
from ctxstore.adapters.local.vector_cache import VectorScope

log = logging.getLogger("ctxstore.search.vectors")

ScopeKey = tuple[str, str, str]  # org, database, store
LOAD_BLOCK = 8192  # rows per fetch


@dataclass(frozen=True)
class Loaded:
    scope: VectorScope
    # Rows that came from SQLite rather than a snapshot (all of them without one): what a new snapshot would save.
    from_sqlite: int


def generation(conn: Connection, key: ScopeKey) -> int:
    row = conn.execute("SELECT generation FROM vector_scopes WHERE org=? AND database=? AND store=?", key).fetchone()
    return int(row[0]) if row else 0


def load_scope(conn: Connection, folder: Path, key: ScopeKey) -> Loaded:
    """In one read transaction, so the generation and the rows agree."""
    conn.execute("BEGIN")
    try:
        gen = generation(conn, key)
        snapshot = vector_snapshot.load(folder, key)
        if snapshot is not None and snapshot.generation == gen:
            return Loaded(snapshot, 0)
        if snapshot is not None:
            caught = _catch_up(conn, key, snapshot, gen)
            if caught is not None:
                return caught
        return _read_all(conn, key, gen)
    finally:
        conn.execute("COMMIT")


def _blocks(cur: Cursor, dim: int | None) -> Iterator[tuple[npt.NDArray[np.int64], list[str], npt.NDArray[np.float32]]]:
    """Rows of `SELECT id, collection, dim, vector` as (ids, collections, matrix) blocks of one dimension, the
    first block's unless `dim` is given; ValueError on a row of another."""
    while block := cur.fetchmany(LOAD_BLOCK):
        dim = int(block[0][2]) if dim is None else dim
        if any(int(r[2]) != dim for r in block):
            raise ValueError(f"vectors of different dimensions ({dim} and others)")
        rows = np.frombuffer(b"".join(r[3] for r in block), dtype="<f4").reshape(len(block), dim)
        yield np.fromiter((r[0] for r in block), dtype=np.int64, count=len(block)), [str(r[1]) for r in block], rows


def _catch_up(conn: Connection, key: ScopeKey, scope: VectorScope, gen: int) -> Loaded | None:
    """The snapshot's scope with the rows deleted and written since; None when they do not fit it (another dim)."""
    ids = scope.ids[: scope.n]
    high = int(ids.max()) if len(ids) else 0
    listed = conn.execute("SELECT id FROM chunks WHERE org=? AND database=? AND store=? AND id <= ?", (*key, high))
    present = np.fromiter((r[0] for r in listed), dtype=np.int64)
    gone = ids[~np.isin(ids, present)]
    scope.remove(gone.tolist())
    # `+org`: the id range on the table, not the (org, database, store, ...) index, whose entries would all be visited.
    cur = conn.execute(
        "SELECT id, collection, dim, vector FROM chunks"
        " WHERE id > ? AND +org=? AND +database=? AND +store=? AND vector IS NOT NULL ORDER BY id",
        (high, *key),
    )
    added = 0
    try:
        for rowids, collections, rows in _blocks(cur, scope.dim):
            scope.add_block(rowids, collections, rows)
            added += len(rowids)
    except ValueError:  # rows of another dimension: the full read says so
        return None
    log.info(
        "vectors of %s/%s: snapshot at generation %d caught up to %d (%d rows added, %d deleted)",
        key[1], key[2], scope.generation, gen, added, len(gone),
    )  # fmt: skip
    scope.generation = gen
    return Loaded(scope, added + len(gone))


def _read_all(conn: Connection, key: ScopeKey, gen: int) -> Loaded:
    """Every row, read in blocks straight into the cache's matrix.

    Fetching every row at once held each vector three times over (the row's bytes, a per-row array, the matrix)
    and cost a Python step per row: 1M chunks took 103 s and peaked at 6.9 GB (docs/benchmarks.md)."""
    (count,) = conn.execute(
        "SELECT count(*) FROM chunks WHERE org=? AND database=? AND store=? AND vector IS NOT NULL", key
    ).fetchone()
    cur = conn.execute(
        "SELECT id, collection, dim, vector FROM chunks"
        " WHERE org=? AND database=? AND store=? AND vector IS NOT NULL ORDER BY id",
        key,
    )
    cache: VectorScope | None = None
    try:
        for rowids, collections, rows in _blocks(cur, None):
            if cache is None:
                cache = VectorScope.empty(gen, rows.shape[1], capacity=max(1024, count + count // 4))
            cache.add_block(rowids, collections, rows)
    except ValueError as exc:
        raise ValueError(f"scope {key[1]}/{key[2]}: {exc}") from None
    if cache is None:
        return Loaded(VectorScope.empty(gen, 0, capacity=0), 0)
    return Loaded(cache, cache.n)
