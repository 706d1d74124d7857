"""The ids a search hit names, by row id: (chunk_id, item_id, collection), read from `chunks` once and kept.

A query reads them for mostly the same rows three times: its first vector search, its keyword lane and its
feedback search (~0.6 ms each at 1M). A row's ids never change (an upsert deletes the row and inserts another,
and row ids are never reused: AUTOINCREMENT), so an entry stays right while its row exists; the index forgets
the rows a write deletes when it applies the write (SqliteSearchIndex._apply), before the next search. An entry
read by a search whose snapshot predates a delete may outlive its row: no later search meets that row id again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from sqlite3 import Connection

import numpy as np
import numpy.typing as npt

HitIds = tuple[str, str, str]
# Entries kept: a query meets ~300 rows, most of them its own, so a few dozen queries' worth is enough; emptied
# when full (~4 MB of entries at most).
CAPACITY = 20_000


class HitRows:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._lock = threading.Lock()
        self._rows: dict[int, HitIds] = {}
        self._capacity = capacity

    def get(self, conn: Connection, rowids: npt.NDArray[np.int64]) -> dict[int, HitIds]:
        """The ids of those of `rowids` that exist (read through `conn`, the caller's snapshot, when not kept)."""
        wanted = [int(x) for x in rowids]
        with self._lock:
            found = {r: self._rows[r] for r in wanted if r in self._rows}
        missing = [r for r in wanted if r not in found]
        if missing:
            read = {
                int(r[0]): (str(r[1]), str(r[2]), str(r[3]))
                for r in conn.execute(
                    "SELECT id, chunk_id, item_id, collection FROM chunks INDEXED BY chunks_hits"
                    " WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(missing),),
                ).fetchall()
            }
            found.update(read)
            with self._lock:
                if len(self._rows) + len(read) > self._capacity:
                    self._rows.clear()
                self._rows.update(read)
        return found

    def forget(self, rowids: Iterable[int]) -> None:
        with self._lock:
            for rowid in rowids:
                self._rows.pop(int(rowid), None)
