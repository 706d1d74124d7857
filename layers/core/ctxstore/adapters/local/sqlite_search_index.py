"""SearchIndex on SQLite: chunks table, FTS5 postings for keywords (bm25 per scope), numpy vector search.

One file of its own (e.g. data_dir/"search.db"), so heavy index writes never block record writes.

- Keyword search: Porter stems prefixed with the chunk's collection code in an external-content FTS5 table, scored per
  query with bm25 from the queried collections' own statistics (keyword_lane.py); document frequencies live in `kw_df`
  and collection sizes in `kw_scopes`, both kept in the writes' transactions (keyword_postings.py).
- Vector search: vectors are float32 BLOBs in `chunks`; per (org, database, store) a matrix is loaded lazily into
  memory and kept current on upsert/delete. Each scope has a generation counter that every write bumps in the same
  transaction, so a cache that missed a write (another process, a race) is noticed and reloaded. Filters become a
  candidate mask before the top-k. Large scopes shortlist by 1-bit codes and rescore exactly (vector_cache.py), or use
  an HNSW index when enabled.
- Scores are raw: keyword = bm25 (higher is better), vector = dot product (cosine for unit vectors).
- An empty `collections` in a filter means every collection of the database.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from sqlite3 import Connection
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local import keyword_postings as kp
from ctxstore.adapters.local import keyword_terms as kt
from ctxstore.adapters.local import remapped_matrix, vector_loading, vector_snapshot
from ctxstore.adapters.local.ann_keeper import AnnKeeper
from ctxstore.adapters.local.hit_rows import HitRows
from ctxstore.adapters.local.keyword_lane import KeywordLane, keyword_query
from ctxstore.adapters.local.keyword_merge import KeywordMerger
from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_search_migration import migrate_keywords
from ctxstore.adapters.local.sqlite_search_sql import (
    CHUNK_COLUMNS,
    KW_DELETE,
    KW_INSERT,
    SCHEMA,
    Vector,
    chunk_doc,
    count_scopes,
    filter_sql,
    insert_chunk,
    scope_id,
    vector_blob,
)
from ctxstore.adapters.local.vector_cache import (
    APPROX_MIN_ROWS,
    NARROW_BREADTH,
    SHORTLIST_MIN,
    VectorScope,
    nearest,
)
from ctxstore.adapters.local.vector_snapshot_keeper import SnapshotKeeper
from ctxstore.ports.search_index import ChunkDoc, Hit, ItemKey, SearchFilter, Store

log = logging.getLogger("ctxstore.search")

_STORES: tuple[Store, ...] = ("knowledge", "memory")
# How long the warm-up, and then a query, wait for a scope's saved HNSW index to load (~1 s at 1M rows) rather
# than search by the shortlist meanwhile (ann_keeper.py).
WARM_UP_ANN_WAIT_S = 120.0
QUERY_ANN_WAIT_S = 10.0
# Vector scopes kept in memory, least recently used dropped first past this many bytes (the scope in use is
# always kept), so idle scopes do not add up without end. One scope of 1M 384-d rows counts ~2.1 GB (its
# arrays at the capacity it loads with, 1.25M rows, its codes and position map): 4 GiB keeps it beside
# smaller ones, so a node with one large database does not read it again after each query elsewhere.
VECTOR_CACHE_BYTES = 4 << 30

ScopeKey = tuple[str, str, str]  # org, database, store


@dataclass
class _Delta:
    removed: dict[ScopeKey, list[int]] = field(default_factory=lambda: defaultdict(list))
    added: dict[ScopeKey, list[tuple[int, str, Vector]]] = field(default_factory=lambda: defaultdict(list))
    generations: dict[ScopeKey, int] = field(default_factory=dict)  # generation before this write


class SqliteSearchIndex:
    def __init__(
        self,
        path: Path,
        *,
        approx_min_rows: int = APPROX_MIN_ROWS,
        shortlist_min: int = SHORTLIST_MIN,
        ann_min_rows: int | None = None,  # None: no index (serve passes CTXSTORE_VECTOR_ANN_MIN_ROWS)
        ann_in_background: bool = True,
        snapshot_every_s: float = 0,  # > 0: save large changed scopes' vector snapshots this often (serve)
        keyword_merge_every_s: float = 0,  # > 0: look this often for an idle keyword index to merge (serve)
        vector_cache_bytes: int = VECTOR_CACHE_BYTES,
    ) -> None:
        self._db = SqliteDb(path)
        self._snapshots = vector_snapshot.folder_for(path)
        remapped_matrix.remove_leftovers(self._snapshots)
        # Scopes this large shortlist rows by 1-bit codes and rescore them exactly (vector_cache.py).
        self._approx_min_rows = approx_min_rows
        self._shortlist_min = shortlist_min
        self._db.executescript(SCHEMA)
        migrate_keywords(self._db)
        self._vectors: OrderedDict[ScopeKey, VectorScope] = OrderedDict()  # least recently used first
        self._vector_cache_bytes = vector_cache_bytes
        self._cache_lock = threading.Lock()
        ann_dir, scopes = path.parent / f"{path.name}.ann", self._vectors.items  # HNSW indexes (ann_keeper.py)
        self._ann = AnnKeeper(
            ann_dir, self._cache_lock, min_rows=ann_min_rows, in_background=ann_in_background, scopes=scopes
        )
        self._write_lock = threading.Lock()  # in-process writers: SQL commit and cache update together
        self._vocab_ready = threading.local()
        self._keywords = KeywordLane()
        self._hits = HitRows()
        self._snapshot_keeper = SnapshotKeeper(self._snapshots, self._cache_lock)
        if snapshot_every_s > 0:
            self._snapshot_keeper.start(snapshot_every_s, lambda: list(self._vectors.items()))
        self.keyword_merger = KeywordMerger(self._db, self._write_lock)  # public: its thresholds are tunable
        if keyword_merge_every_s > 0:
            self.keyword_merger.start(keyword_merge_every_s)

    def close(self) -> None:
        self.keyword_merger.stop()
        self._snapshot_keeper.stop()
        self.save_vector_snapshots()
        self._ann.stop()  # its feeding: what it has not added, the next start's catch-up does
        self._ann.save(self._vectors.items())  # the HNSW indexes changed since loaded or saved
        self._db.close()

    def save_vector_snapshots(self) -> int:
        """Save every cached scope not saved as it is (a clean close: the next start reads it back in one go)."""
        with self._write_lock, self._cache_lock:
            return self._snapshot_keeper.save_current(list(self._vectors.items()))

    def merge_keyword_segments(self) -> int:
        """Merge the keyword index's segments now if it is idle and has many (keyword_merge.py); answers the steps."""
        return self.keyword_merger.merge_while_idle()

    def save_due_snapshots(self) -> int:
        """Save the large scopes that changed enough since their last snapshot (vector_snapshot_keeper.py)."""
        return self._snapshot_keeper.save_due(lambda: list(self._vectors.items()))

    def warm_vectors(self) -> int:
        """Read every scope's vectors into memory now rather than on its first query; answers the scopes read."""
        keys = [
            (str(o), str(d), str(s))
            for o, d, s in self._db.conn.execute("SELECT org, database, store FROM vector_scopes")
        ]
        for key in keys:
            self._ann.ensure(key, self._scope(key))
            self._ann.wait_loaded(key, WARM_UP_ANN_WAIT_S)
        return len(keys)

    # -- writes ---------------------------------------------------------------------------------

    @staticmethod
    def _bump(conn: Connection, key: ScopeKey, delta: _Delta) -> None:
        if key in delta.generations:
            return
        row = conn.execute(
            "SELECT generation FROM vector_scopes WHERE org=? AND database=? AND store=?", key
        ).fetchone()
        gen = int(row[0]) if row else 0
        conn.execute(
            "INSERT INTO vector_scopes (org, database, store, generation) VALUES (?,?,?,?)"
            " ON CONFLICT (org, database, store) DO UPDATE SET generation=excluded.generation",
            (*key, gen + 1),
        )
        delta.generations[key] = gen

    def _apply(self, delta: _Delta) -> None:
        """After a write's commit, under the write lock: the cached scopes follow it, and merging waits."""
        self.keyword_merger.wrote()
        self._hits.forget(rowid for rows in delta.removed.values() for rowid in rows)
        with self._cache_lock:
            for key, gen in delta.generations.items():
                cache = self._vectors.get(key)
                if cache is None:
                    continue
                if cache.generation != gen:
                    continue  # missed a write somewhere: the next use reloads it (and catches its index up)
                try:
                    cache.remove(delta.removed.get(key, ()))
                    cache.add(delta.added.get(key, ()))
                except ValueError:
                    del self._vectors[key]
                    self._snapshot_keeper.forget(key)
                    continue
                cache.generation = gen + 1
                self._snapshot_keeper.changed(key, len(delta.removed.get(key, ())) + len(delta.added.get(key, ())))
        self._ann.wrote()

    def _delete_rows(self, conn: Connection, where: str, params: Sequence[Any], delta: _Delta) -> int:
        rows = conn.execute(
            f"DELETE FROM chunks WHERE {where} RETURNING id, org, database, store, dim, kw_scope, kw_len,"
            " kw_title, kw_text",
            params,
        ).fetchall()
        if rows:
            conn.execute(KW_DELETE, (json.dumps([[r[0], r[7], r[8]] for r in rows]),))
        removed: dict[int, tuple[int, int]] = {}
        gone: Counter[str] = Counter()
        for rowid, org, database, store, dim, sid, length, kw_title, kw_text in rows:
            gone.update(kp.row_tokens(kw_title, kw_text))
            key = (org, database, store)
            self._bump(conn, key, delta)
            if dim is not None:
                delta.removed[key].append(int(rowid))
            if sid is not None:
                n, t = removed.get(int(sid), (0, 0))
                removed[int(sid)] = (n - 1, t - int(length or 0))
        count_scopes(conn, removed)
        kp.change_doc_freqs(conn, Counter({token: -n for token, n in gone.items()}), removed)
        return len(rows)

    @staticmethod
    def _check_dims(conn: Connection, org: str, prepared: Sequence[tuple[ChunkDoc, int | None, Any, Any]]) -> None:
        """Every vector in one (org, database, store) has one dimension; a mismatch is rejected whole."""
        dims: dict[tuple[str, str], int] = {}
        for c, dim, _, _ in prepared:
            if dim is None:
                continue
            key = (c.database, c.store)
            if key not in dims:
                row = conn.execute(
                    "SELECT dim FROM chunks WHERE org=? AND database=? AND store=? AND dim IS NOT NULL"
                    " AND chunk_id NOT IN (SELECT value FROM json_each(?)) LIMIT 1",
                    (org, c.database, c.store, json.dumps([p[0].chunk_id for p in prepared])),
                ).fetchone()
                dims[key] = int(row[0]) if row else dim
            if dims[key] != dim:
                raise ValueError(
                    f"vector dimension {dim} for chunk {c.chunk_id!r} differs from {dims[key]}"
                    f" in {c.database}/{c.store}"
                )

    def ensure_database(self, org: str, database: str) -> bool:
        with self._db.write() as conn:
            conn.execute("INSERT OR IGNORE INTO databases (org, database) VALUES (?, ?)", (org, database))
        return True

    def upsert(self, org: str, chunks: Sequence[ChunkDoc]) -> None:
        if chunks:
            self._write(org, (), chunks)

    def replace_items(self, org: str, items: Sequence[ItemKey], chunks: Sequence[ChunkDoc]) -> None:
        # One transaction for a worker's whole batch: FTS5 writes a segment and kw_df rewrites its pages per
        # commit, so eight items in one write cost about half of eight writes (bench diagnostic, issue 15).
        if items or chunks:
            self._write(org, items, chunks)

    def _write(self, org: str, replaced: Sequence[ItemKey], chunks: Sequence[ChunkDoc]) -> None:
        """Delete the `replaced` items' rows and upsert `chunks`, in one transaction."""
        latest: dict[str, ChunkDoc] = {c.chunk_id: c for c in chunks}  # the last copy of a chunk_id wins
        prepared = []
        for c in latest.values():
            if c.store not in _STORES:
                raise ValueError(f"unknown store {c.store!r}")
            dim, blob = vector_blob(c.vector)
            prepared.append((c, dim, blob, (kt.stems(c.title), kt.stems(c.text))))
        delta = _Delta()
        with self._write_lock:
            with self._db.write() as conn:
                for item in replaced:
                    self._delete_rows(
                        conn,
                        "org=? AND database=? AND store=? AND collection=? AND item_id=?",
                        (org, item.database, item.store, item.collection, item.item_id),
                        delta,
                    )
                self._check_dims(conn, org, prepared)
                ids = json.dumps(list(latest))
                self._delete_rows(conn, "org=? AND chunk_id IN (SELECT value FROM json_each(?))", (org, ids), delta)
                added: dict[int, list[int]] = defaultdict(lambda: [0, 0])
                tokens: Counter[str] = Counter()
                new_rows: list[int] = []
                for c, dim, blob, (title_terms, text_terms) in prepared:
                    sid = scope_id(conn, org, c.database, c.store, c.collection)
                    code = kt.scope_code(sid)
                    length = len(title_terms) + len(text_terms)
                    added[sid][0] += 1
                    added[sid][1] += length
                    scoped_title, scoped_text = kt.scoped(code, title_terms), kt.scoped(code, text_terms)
                    tokens.update(kp.row_tokens(scoped_title, scoped_text))
                    rowid = insert_chunk(conn, org, c, dim, blob, sid, (scoped_title, scoped_text, length))
                    new_rows.append(rowid)
                    key = (org, c.database, c.store)
                    self._bump(conn, key, delta)
                    if c.vector is not None:
                        delta.added[key].append((int(rowid), c.collection, np.asarray(c.vector, dtype=np.float32)))
                conn.execute(KW_INSERT, (json.dumps(new_rows),))
                count_scopes(conn, {sid: (n, t) for sid, (n, t) in added.items()})
                kp.change_doc_freqs(conn, tokens, added)
            self._apply(delta)

    def delete_item(self, org: str, database: str, collection: str, store: Store, item_id: str) -> int:
        delta = _Delta()
        with self._write_lock:
            with self._db.write() as conn:
                n = self._delete_rows(
                    conn,
                    "org=? AND database=? AND store=? AND collection=? AND item_id=?",
                    (org, database, store, collection, item_id),
                    delta,
                )
            self._apply(delta)
        return n

    def delete_scope(self, org: str, database: str, collection: str | None) -> int:
        delta = _Delta()
        with self._write_lock:
            with self._db.write() as conn:
                if collection is None:
                    n = self._delete_rows(conn, "org=? AND database=?", (org, database), delta)
                    conn.execute("DELETE FROM databases WHERE org=? AND database=?", (org, database))
                else:
                    n = self._delete_rows(
                        conn, "org=? AND database=? AND collection=?", (org, database, collection), delta
                    )
            self._apply(delta)
        return n

    # -- reads ----------------------------------------------------------------------------------

    # -- keyword search: bm25 over the queried collections' own statistics ------------------------

    def _query_conn(self) -> Connection:
        """This thread's connection, with the vocabulary tables that read document frequencies and postings."""
        conn = self._db.conn
        if not getattr(self._vocab_ready, "done", False):
            for statement in kp.VOCAB_TABLES:
                conn.execute(statement)
            self._vocab_ready.done = True
        return conn

    def keyword_search(self, org: str, flt: SearchFilter, query: str, *, limit: int, operator: str = "or") -> list[Hit]:
        q = keyword_query(query, operator)
        if q is None or limit <= 0 or (flt.item_ids is not None and not flt.item_ids):
            return []
        conn = self._query_conn()
        conn.execute("BEGIN")  # one snapshot for the statistics, the postings and the lengths
        try:
            scored = self._keywords.bm25(conn, org, flt, q)
            if scored is None:
                return []
            rowids, scores = scored
            allowed = self._candidate_rowids(org, flt)
            if allowed is not None:
                keep = np.isin(rowids, allowed)
                rowids, scores = rowids[keep], scores[keep]
            k = min(limit, scores.size)
            if k == 0:
                return []
            top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
            top = top[np.lexsort((rowids[top], -scores[top]))]
            found = self._hit_rows(rowids[top])  # this thread's connection: inside the snapshot
        finally:
            conn.execute("COMMIT")
        hits = []
        for i in top:
            meta = found.get(int(rowids[i]))
            if meta is not None:
                hits.append(Hit(chunk_id=meta[0], item_id=meta[1], collection=meta[2], score=float(scores[i])))
        return hits

    def _generation(self, key: ScopeKey) -> int:
        return vector_loading.generation(self._db.conn, key)

    def _load(self, key: ScopeKey) -> VectorScope:
        """From the scope's snapshot, caught up with SQLite when older, or from SQLite (vector_loading.py)."""
        loaded = vector_loading.load_scope(self._db.conn, self._snapshots, key)
        scope, unsaved = self._snapshot_keeper.map_read_scope(key, loaded.scope, loaded.from_sqlite)
        self._snapshot_keeper.loaded(key, unsaved)
        return scope

    def _scope(self, key: ScopeKey) -> VectorScope | None:
        gen = self._generation(key)
        with self._cache_lock:
            cache = self._vectors.get(key)
            if cache is not None and cache.generation == gen:
                self._vectors.move_to_end(key)
                return cache
        # Taking the write lock lets an in-process writer finish updating the cache first.
        with self._write_lock, self._cache_lock:
            cache = self._vectors.get(key)
            if cache is not None and cache.generation == self._generation(key):
                return cache
            loaded = self._load(key)
            if loaded is not None:
                if cache is not None and cache.ann is not None and cache.dim == loaded.dim:
                    loaded.install_ann(cache.ann)  # caught up by rowids: only what changed is re-added
                self._keep(key, loaded)
            return loaded

    def _keep(self, key: ScopeKey, cache: VectorScope) -> None:
        """Cache `cache` as the most recently used scope and drop the least recently used past the bound."""
        self._vectors[key] = cache
        self._vectors.move_to_end(key)
        held = sum(c.nbytes for c in self._vectors.values())
        while held > self._vector_cache_bytes and len(self._vectors) > 1:
            old_key, old = self._vectors.popitem(last=False)
            held -= old.nbytes
            self._snapshot_keeper.forget(old_key)  # a later start catches its snapshot up from SQLite
            log.info("vector scope %s/%s dropped from memory (%d MB cached)", old_key[1], old_key[2], held >> 20)

    def cached_vectors(self) -> tuple[list[ScopeKey], int]:
        """The scopes whose vectors are in memory (least recently used first), and the bytes they may hold."""
        with self._cache_lock:
            return list(self._vectors), sum(c.nbytes for c in self._vectors.values())

    def _candidate_rowids(self, org: str, flt: SearchFilter) -> npt.NDArray[np.int64] | None:
        """Rows allowed by item_ids and metadata filters, or None when only collections restrict."""
        if flt.item_ids is None and not flt.metadata and not flt.additional_metadata:
            return None
        params: list[Any] = [org, flt.database, flt.store]
        extra = filter_sql(flt, params)
        rows = self._db.conn.execute(
            "SELECT c.id FROM chunks AS c WHERE c.org=? AND c.database=? AND c.store=? AND c.vector IS NOT NULL"
            + extra,
            params,
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vector_search(
        self, org: str, flt: SearchFilter, vector: npt.NDArray[np.float32], *, limit: int, narrow: bool = False
    ) -> list[Hit]:
        if limit <= 0 or (flt.item_ids is not None and not flt.item_ids):
            return []
        key = (org, flt.database, flt.store)
        cache = self._scope(key)
        if cache is None or cache.n == 0:
            return []
        self._ann.ensure(key, cache)
        self._ann.wait_loaded(key, QUERY_ANN_WAIT_S)
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != cache.dim:
            raise ValueError(f"query vector has dimension {query.shape[0]}, the index holds {cache.dim}")
        with self._cache_lock:  # a consistent snapshot; the arrays are only appended to or replaced
            codes = sorted({cache.coll_codes[c] for c in flt.collections if c in cache.coll_codes})
            some = flt.collections and len(codes) < len(cache.coll_codes)  # some collections of the scope
            view = cache.view(approximate=cache.n >= self._approx_min_rows, collections=codes if some else None)
        mask = view.alive
        allowed = self._candidate_rowids(org, flt)
        if allowed is not None:
            mask = mask & np.isin(view.ids, allowed)
        k = limit * 2 + 8  # spare rows for ones deleted since the snapshot
        limits = {"approx_min_rows": self._approx_min_rows, "shortlist_min": self._shortlist_min}
        breadth = NARROW_BREADTH if narrow else None
        rowids, scores = nearest(view, query, mask, k, ann_min_rows=self._ann.min_rows or 0, breadth=breadth, **limits)
        if rowids.size == 0:
            return []
        # The best `limit` rows first; the spares only when some of those were deleted since the snapshot.
        found = self._hit_rows(rowids[:limit])
        if len(found) < min(limit, rowids.size):
            found.update(self._hit_rows(rowids[limit:]))
        hits: list[Hit] = []
        for rowid, score in zip(rowids, scores, strict=True):
            meta = found.get(int(rowid))
            if meta is not None:
                hits.append(Hit(chunk_id=meta[0], item_id=meta[1], collection=meta[2], score=float(score)))
                if len(hits) == limit:
                    break
        return hits

    def _hit_rows(self, rowids: npt.NDArray[np.int64]) -> dict[int, tuple[str, str, str]]:
        return self._hits.get(self._db.conn, rowids) if rowids.size else {}

    def get_chunks(self, org: str, chunk_ids: Sequence[str]) -> list[ChunkDoc]:
        if not chunk_ids:
            return []
        rows = self._db.conn.execute(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE org=? AND chunk_id IN (SELECT value FROM json_each(?))",
            (org, json.dumps(list(chunk_ids))),
        ).fetchall()
        by_id = {r[0]: chunk_doc(r) for r in rows}
        return [by_id[c] for c in dict.fromkeys(chunk_ids) if c in by_id]

    def item_chunks(self, org: str, database: str, collection: str, store: Store, item_id: str) -> list[ChunkDoc]:
        rows = self._db.conn.execute(
            f"SELECT {CHUNK_COLUMNS} FROM chunks"
            " WHERE org=? AND database=? AND collection=? AND store=? AND item_id=? ORDER BY position",
            (org, database, collection, store, item_id),
        ).fetchall()
        return [chunk_doc(r) for r in rows]

    def count(self, org: str, database: str, store: Store) -> int:
        (n,) = self._db.conn.execute(
            "SELECT COUNT(*) FROM chunks WHERE org=? AND database=? AND store=?", (org, database, store)
        ).fetchone()
        return int(n)
