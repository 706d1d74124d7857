"""SearchIndex on SQLite: chunks table, FTS5 (bm25) for keywords, exact numpy search over cached vectors.

One file of its own (e.g. data_dir/"search.db"), so heavy index writes never block record writes.

- Keyword search: an external-content FTS5 table over (scope, title, text), tokenizer
  `porter unicode61 remove_diacritics 2`. `scope` holds two opaque tokens per row (one for
  org/database/store, one for that plus the collection) so the scope filter is a posting-list
  intersection inside FTS5 instead of a scan of every match; its bm25 weight is 0. User text never
  reaches the MATCH grammar: it is split into words and each word is double-quoted.
- Vector search: vectors are float32 BLOBs in `chunks`; per (org, database, store) a matrix is loaded
  lazily into memory and kept current on upsert/delete. Each scope has a generation counter that
  every write bumps in the same transaction, so a cache that missed a write (another process, a
  race) is noticed and reloaded. Filters become a candidate mask before the top-k. Large scopes
  shortlist by 1-bit codes and rescore exactly (vector_cache.py).
- Scores are raw: keyword = -bm25 (higher is better), vector = dot product of the stored and query
  vectors (cosine for unit vectors).
- An empty `collections` in a filter means every collection of the database.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from sqlite3 import Connection
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.vector_cache import APPROX_MIN_ROWS, SHORTLIST_MIN, VectorScope, nearest
from ctxstore.domain.stopwords import ENGLISH_STOPWORDS
from ctxstore.ports.search_index import ChunkDoc, Hit, SearchFilter, Store

Vector = npt.NDArray[np.float32]

TITLE_WEIGHT = 2.0
TEXT_WEIGHT = 1.0
MAX_QUERY_TERMS = 64
# An OR query whose terms' postings add up past this drops its most common terms (keeping at least
# two): bm25 scores every matching row, so three very common words over 100k chunks cost ~120 ms,
# while the words they drop carry the lowest idf and move the ranking least.
MAX_OR_POSTINGS = 5_000
_DF_TTL_S = 60.0

_SCHEMA = """
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
    vector BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_by_id ON chunks (org, chunk_id);
CREATE INDEX IF NOT EXISTS chunks_by_item ON chunks (org, database, store, collection, item_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    scope, title, text,
    content='chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, scope, title, text) VALUES (new.id, new.scope, new.title, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, scope, title, text)
    VALUES ('delete', old.id, old.scope, old.title, old.text);
END;
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

_WORD = re.compile(r"\w+", re.UNICODE)
# Lucene's English stop set. Dropped from "or" queries only (unless nothing else is left): under bm25 they
# add almost nothing to the ranking but make FTS5 score nearly every row.
STOPWORDS = ENGLISH_STOPWORDS
_STORES: tuple[Store, ...] = ("knowledge", "memory")

ScopeKey = tuple[str, str, str]  # org, database, store


def _token(*parts: str) -> str:
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=12).hexdigest()
    return "z" + digest  # letters and digits only: one token under unicode61, never a stem change of note


def _store_token(org: str, database: str, store: str) -> str:
    return _token("s", org, database, store)


def _collection_token(org: str, database: str, store: str, collection: str) -> str:
    return _token("c", org, database, store, collection)


def fts_terms(query: str) -> list[str]:
    """Words of a user query, deduplicated in order, each safe to double-quote for FTS5."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query):
        seen.setdefault(word.lower(), None)
    return list(seen)[:MAX_QUERY_TERMS]


def fts_expression(query: str, operator: str) -> str | None:
    """A MATCH expression for the title and text columns, or None when the query has no words."""
    terms = fts_terms(query) if operator != "phrase" else [w.lower() for w in _WORD.findall(query)]
    if not terms:
        return None
    if operator == "phrase":
        body = '"' + " ".join(terms) + '"'
    elif operator == "and":
        body = " AND ".join(f'"{t}"' for t in terms)
    elif operator == "or":
        body = " OR ".join(f'"{t}"' for t in ([t for t in terms if t not in STOPWORDS] or terms))
    else:
        raise ValueError(f"unknown keyword operator {operator!r}; use 'or', 'and' or 'phrase'")
    return "{title text} : (" + body + ")"


def _vector_blob(vector: Vector | None) -> tuple[int | None, bytes | None]:
    if vector is None:
        return None, None
    arr = np.asarray(vector, dtype="<f4")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"a chunk vector must be one-dimensional and non-empty, got shape {arr.shape}")
    return int(arr.size), arr.tobytes()


def _filter_values(value: Any) -> list[Any]:
    values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
    for v in values:
        if isinstance(v, dict | list | tuple):
            raise ValueError("metadata filter values must be scalars or lists of scalars")
    return values


@dataclass
class _Delta:
    removed: dict[ScopeKey, list[int]] = field(default_factory=lambda: defaultdict(list))
    added: dict[ScopeKey, list[tuple[int, str, Vector]]] = field(default_factory=lambda: defaultdict(list))
    generations: dict[ScopeKey, int] = field(default_factory=dict)  # generation before this write


class SqliteSearchIndex:
    def __init__(
        self, path: Path, *, approx_min_rows: int = APPROX_MIN_ROWS, shortlist_min: int = SHORTLIST_MIN
    ) -> None:
        self._db = SqliteDb(path)
        # Scopes this large shortlist rows by 1-bit codes and rescore them exactly (vector_cache.py).
        self._approx_min_rows = approx_min_rows
        self._shortlist_min = shortlist_min
        self._db.executescript(_SCHEMA)
        self._vectors: dict[ScopeKey, VectorScope] = {}
        self._cache_lock = threading.Lock()
        self._write_lock = threading.Lock()  # in-process writers: SQL commit and cache update together
        self._vocab_ready = threading.local()
        self._df_cache: dict[str, tuple[int, float]] = {}

    def close(self) -> None:
        self._db.close()

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
        with self._cache_lock:
            for key, gen in delta.generations.items():
                cache = self._vectors.get(key)
                if cache is None:
                    continue
                if cache.generation != gen:
                    del self._vectors[key]  # missed a write somewhere: reload on next use
                    continue
                try:
                    cache.remove(delta.removed.get(key, ()))
                    cache.add(delta.added.get(key, ()))
                except ValueError:
                    del self._vectors[key]
                    continue
                cache.generation = gen + 1

    def _delete_rows(self, conn: Connection, where: str, params: Sequence[Any], delta: _Delta) -> int:
        rows = conn.execute(
            f"DELETE FROM chunks WHERE {where} RETURNING id, org, database, store, dim", params
        ).fetchall()
        for rowid, org, database, store, dim in rows:
            key = (org, database, store)
            self._bump(conn, key, delta)
            if dim is not None:
                delta.removed[key].append(int(rowid))
        return len(rows)

    @staticmethod
    def _check_dims(conn: Connection, org: str, prepared: Sequence[tuple[ChunkDoc, int | None, Any, str]]) -> None:
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
        if not chunks:
            return
        latest: dict[str, ChunkDoc] = {c.chunk_id: c for c in chunks}  # the last copy of a chunk_id wins
        prepared = []
        for c in latest.values():
            if c.store not in _STORES:
                raise ValueError(f"unknown store {c.store!r}")
            dim, blob = _vector_blob(c.vector)
            scope = " ".join(
                (_store_token(org, c.database, c.store), _collection_token(org, c.database, c.store, c.collection))
            )
            prepared.append((c, dim, blob, scope))
        delta = _Delta()
        with self._write_lock:
            with self._db.write() as conn:
                self._check_dims(conn, org, prepared)
                ids = json.dumps(list(latest))
                self._delete_rows(conn, "org=? AND chunk_id IN (SELECT value FROM json_each(?))", (org, ids), delta)
                for c, dim, blob, scope in prepared:
                    (rowid,) = conn.execute(
                        "INSERT INTO chunks (org, database, collection, store, item_id, chunk_id, title, text, scope,"
                        " source_type, metadata, additional_metadata, created_at, position, dim, vector)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                        (
                            org,
                            c.database,
                            c.collection,
                            c.store,
                            c.item_id,
                            c.chunk_id,
                            c.title,
                            c.text,
                            scope,
                            c.source_type,
                            json.dumps(c.metadata, separators=(",", ":")),
                            json.dumps(c.additional_metadata, separators=(",", ":")),
                            c.created_at,
                            c.position,
                            dim,
                            blob,
                        ),
                    ).fetchone()
                    key = (org, c.database, c.store)
                    self._bump(conn, key, delta)
                    if c.vector is not None:
                        delta.added[key].append((int(rowid), c.collection, np.asarray(c.vector, dtype=np.float32)))
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

    @staticmethod
    def _filter_sql(flt: SearchFilter, params: list[Any]) -> str:
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
                clause = _metadata_clause(column, key, value, sub)
                clauses.append(clause)
                params.extend(sub)
        return "".join(f" AND {c}" for c in clauses)

    # -- postings pruning for OR queries -----------------------------------------------------------

    def _query_conn(self) -> Connection:
        """This thread's connection, with the temp tables that stem words and read document counts."""
        conn = self._db.conn
        if not getattr(self._vocab_ready, "done", False):
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, chunks_fts, 'row')"
            )
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words"
                " USING fts5(t, tokenize='porter unicode61 remove_diacritics 2')"
            )
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_stems USING fts5vocab(temp, query_words, 'instance')"
            )
            self._vocab_ready.done = True
        return conn

    def _doc_freqs(self, words: list[str]) -> dict[str, int]:
        """Rows containing each word (index-wide, after stemming); cached for a minute."""
        conn = self._query_conn()
        conn.execute("DELETE FROM temp.query_words")
        conn.executemany("INSERT INTO temp.query_words (rowid, t) VALUES (?, ?)", list(enumerate(words, 1)))
        stems = {int(doc): str(term) for doc, term in conn.execute("SELECT doc, term FROM temp.query_stems")}
        now = time.monotonic()
        out: dict[str, int] = {}
        for i, word in enumerate(words, 1):
            stem = stems.get(i)
            if stem is None:
                out[word] = 0
                continue
            cached = self._df_cache.get(stem)
            if cached is None or now - cached[1] > _DF_TTL_S:
                row = conn.execute("SELECT doc FROM temp.chunks_vocab WHERE term = ?", (stem,)).fetchone()
                cached = (int(row[0]) if row else 0, now)
                if len(self._df_cache) > 50_000:
                    self._df_cache.clear()
                self._df_cache[stem] = cached
            out[word] = cached[0]
        return out

    def _or_query(self, query: str) -> str:
        terms = [t for t in fts_terms(query) if t not in STOPWORDS] or fts_terms(query)
        if len(terms) <= 2 or self._rows_estimate() <= MAX_OR_POSTINGS:
            return query
        dfs = self._doc_freqs(terms)
        if sum(dfs.values()) <= MAX_OR_POSTINGS:
            return query
        kept: list[str] = []
        total = 0
        for word in sorted(terms, key=lambda w: (dfs[w], terms.index(w))):
            if len(kept) >= 2 and total + dfs[word] > MAX_OR_POSTINGS:
                break
            kept.append(word)
            total += dfs[word]
        return " ".join(w for w in terms if w in kept)

    def _rows_estimate(self) -> int:
        row = self._db.conn.execute("SELECT max(id) FROM chunks").fetchone()
        return int(row[0] or 0)

    def keyword_search(self, org: str, flt: SearchFilter, query: str, *, limit: int, operator: str = "or") -> list[Hit]:
        if operator == "or":
            query = self._or_query(query)
        body = fts_expression(query, operator)
        if body is None or limit <= 0 or (flt.item_ids is not None and not flt.item_ids):
            return []
        if flt.collections:
            tokens = " OR ".join(
                f'"{_collection_token(org, flt.database, flt.store, c)}"' for c in dict.fromkeys(flt.collections)
            )
        else:
            tokens = f'"{_store_token(org, flt.database, flt.store)}"'
        match = f"scope : ({tokens}) AND {body}"
        if flt.item_ids is None and not flt.metadata and not flt.additional_metadata:
            # The scope tokens already restrict to org/database/store/collections: rank inside FTS5 and
            # join only the top rows (the outer conditions just re-check them).
            rows = self._db.conn.execute(
                "SELECT c.chunk_id, c.item_id, c.collection, t.rank FROM"
                " (SELECT rowid AS id, bm25(chunks_fts, 0.0, ?, ?) AS rank FROM chunks_fts"
                "  WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?) AS t"
                " JOIN chunks AS c ON c.id = t.id WHERE c.org=? AND c.database=? AND c.store=? ORDER BY t.rank",
                (TITLE_WEIGHT, TEXT_WEIGHT, match, limit, org, flt.database, flt.store),
            ).fetchall()
            return [Hit(chunk_id=r[0], item_id=r[1], collection=r[2], score=-float(r[3])) for r in rows]
        params: list[Any] = [TITLE_WEIGHT, TEXT_WEIGHT, match, org, flt.database, flt.store]
        extra = self._filter_sql(flt, params)
        params.append(limit)
        rows = self._db.conn.execute(
            "SELECT c.chunk_id, c.item_id, c.collection, bm25(chunks_fts, 0.0, ?, ?) AS rank"
            " FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid"
            " WHERE chunks_fts MATCH ? AND c.org=? AND c.database=? AND c.store=?" + extra + " ORDER BY rank LIMIT ?",
            params,
        ).fetchall()
        return [Hit(chunk_id=r[0], item_id=r[1], collection=r[2], score=-float(r[3])) for r in rows]

    def _generation(self, key: ScopeKey) -> int:
        row = self._db.conn.execute(
            "SELECT generation FROM vector_scopes WHERE org=? AND database=? AND store=?", key
        ).fetchone()
        return int(row[0]) if row else 0

    def _load(self, key: ScopeKey) -> VectorScope | None:
        conn = self._db.conn
        conn.execute("BEGIN")  # one read snapshot for the generation and the rows
        try:
            gen = self._generation(key)
            rows = conn.execute(
                "SELECT id, collection, dim, vector FROM chunks"
                " WHERE org=? AND database=? AND store=? AND vector IS NOT NULL ORDER BY id",
                key,
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        if not rows:
            return VectorScope.empty(gen, 0, capacity=0)
        dim = int(rows[0][2])
        if any(int(r[2]) != dim for r in rows):
            raise ValueError(f"scope {key[1]}/{key[2]} holds vectors of different dimensions")
        cache = VectorScope.empty(gen, dim, capacity=max(1024, len(rows) + len(rows) // 4))
        cache.add([(int(r[0]), str(r[1]), np.frombuffer(r[3], dtype="<f4").astype(np.float32)) for r in rows])
        return cache

    def _scope(self, key: ScopeKey) -> VectorScope | None:
        gen = self._generation(key)
        with self._cache_lock:
            cache = self._vectors.get(key)
            if cache is not None and cache.generation == gen:
                return cache
        # Taking the write lock lets an in-process writer finish updating the cache first.
        with self._write_lock, self._cache_lock:
            cache = self._vectors.get(key)
            if cache is not None and cache.generation == self._generation(key):
                return cache
            loaded = self._load(key)
            if loaded is not None:
                self._vectors[key] = loaded
            return loaded

    def _candidate_rowids(self, org: str, flt: SearchFilter) -> npt.NDArray[np.int64] | None:
        """Rows allowed by item_ids and metadata filters, or None when only collections restrict."""
        if flt.item_ids is None and not flt.metadata and not flt.additional_metadata:
            return None
        params: list[Any] = [org, flt.database, flt.store]
        extra = self._filter_sql(flt, params)
        rows = self._db.conn.execute(
            "SELECT c.id FROM chunks AS c WHERE c.org=? AND c.database=? AND c.store=? AND c.vector IS NOT NULL"
            + extra,
            params,
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vector_search(self, org: str, flt: SearchFilter, vector: npt.NDArray[np.float32], *, limit: int) -> list[Hit]:
        if limit <= 0 or (flt.item_ids is not None and not flt.item_ids):
            return []
        cache = self._scope((org, flt.database, flt.store))
        if cache is None or cache.n == 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != cache.dim:
            raise ValueError(f"query vector has dimension {query.shape[0]}, the index holds {cache.dim}")
        with self._cache_lock:  # a consistent snapshot; the arrays are only appended to or replaced
            view = cache.view(approximate=cache.n >= self._approx_min_rows)
            codes = [cache.coll_codes[c] for c in flt.collections if c in cache.coll_codes]
        mask = view.alive
        if flt.collections:
            mask &= np.isin(view.coll, np.asarray(codes, dtype=np.int32))
        allowed = self._candidate_rowids(org, flt)
        if allowed is not None:
            mask &= np.isin(view.ids, allowed)
        k = limit * 2 + 8  # spare rows for ones deleted since the snapshot
        rowids, scores = nearest(
            view, query, mask, k, approx_min_rows=self._approx_min_rows, shortlist_min=self._shortlist_min
        )
        if rowids.size == 0:
            return []
        found = {
            int(r[0]): (str(r[1]), str(r[2]), str(r[3]))
            for r in self._db.conn.execute(
                "SELECT id, chunk_id, item_id, collection FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([int(x) for x in rowids]),),
            ).fetchall()
        }
        hits: list[Hit] = []
        for rowid, score in zip(rowids, scores, strict=True):
            meta = found.get(int(rowid))
            if meta is not None:
                hits.append(Hit(chunk_id=meta[0], item_id=meta[1], collection=meta[2], score=float(score)))
                if len(hits) == limit:
                    break
        return hits

    _CHUNK_COLUMNS = (
        "chunk_id, item_id, database, collection, store, text, vector, title, source_type,"
        " created_at, metadata, additional_metadata, position"
    )

    @staticmethod
    def _chunk_doc(r: Sequence[Any]) -> ChunkDoc:
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

    def get_chunks(self, org: str, chunk_ids: Sequence[str]) -> list[ChunkDoc]:
        if not chunk_ids:
            return []
        rows = self._db.conn.execute(
            f"SELECT {self._CHUNK_COLUMNS} FROM chunks WHERE org=? AND chunk_id IN (SELECT value FROM json_each(?))",
            (org, json.dumps(list(chunk_ids))),
        ).fetchall()
        by_id = {r[0]: self._chunk_doc(r) for r in rows}
        return [by_id[c] for c in dict.fromkeys(chunk_ids) if c in by_id]

    def item_chunks(self, org: str, database: str, collection: str, store: Store, item_id: str) -> list[ChunkDoc]:
        rows = self._db.conn.execute(
            f"SELECT {self._CHUNK_COLUMNS} FROM chunks"
            " WHERE org=? AND database=? AND collection=? AND store=? AND item_id=? ORDER BY position",
            (org, database, collection, store, item_id),
        ).fetchall()
        return [self._chunk_doc(r) for r in rows]

    def count(self, org: str, database: str, store: Store) -> int:
        (n,) = self._db.conn.execute(
            "SELECT COUNT(*) FROM chunks WHERE org=? AND database=? AND store=?", (org, database, store)
        ).fetchone()
        return int(n)


def _metadata_clause(column: str, key: str, value: Any, params: list[Any]) -> str:
    """Exact match on a top-level key; a list filter matches any value, a stored list matches any element."""
    values = _filter_values(value)
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
