"""An in-memory SearchIndex: exact vector search, bm25 keyword search, filters, per-item replacement.

Semantics as the port and its contract suite demand: chunk ids are unique per organisation (the last copy
in a batch wins), scopes (org, database, store, collection) never see each other, metadata filters match
exactly (a list filter matches any value, a stored list any element; "2024" is not 2024), `item_ids=[]`
matches nothing, and one (org, database, store) holds vectors of one dimension. Words are folded, split
like FTS5's unicode61 and Porter-stemmed; bm25 statistics are per collection, as on SQLite. An "or" query
drops English stop words (unless nothing else is left); "and" and "phrase" keep every word.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import Stemmer  # type: ignore[import-not-found]

from ctxstore.adapters.local.sqlite_search_sql import filter_values as _filter_values
from ctxstore.domain.stopwords import ENGLISH_STOPWORDS
from ctxstore.ports.search_index import ChunkDoc, Hit, ItemKey, SearchFilter, Store

_STORES: tuple[Store, ...] = ("knowledge", "memory")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
K1, B = 1.2, 0.75


def _words(text: str) -> list[str]:
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    return _WORD.findall(folded)


@dataclass(frozen=True)
class _Entry:
    doc: ChunkDoc
    terms: tuple[str, ...]  # stems of title then text, in order (phrases match inside either field)
    title_len: int


def _same(a: Any, b: Any) -> bool:
    """JSON equality: a number never equals a string (bool and 1 are one value in SQLite's JSON, kept so)."""
    numeric = (int, float, bool)
    if isinstance(a, numeric) and isinstance(b, numeric):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _matches(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    for key, value in wanted.items():
        values = _filter_values(value)
        if key not in stored:
            return False
        have = stored[key]
        have_list = have if isinstance(have, list) else [have]
        if not any(_same(h, v) for h in have_list for v in values if not isinstance(h, dict | list)):
            return False
    return True


class InMemorySearchIndex:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._chunks: dict[tuple[str, str], _Entry] = {}  # (org, chunk id)
        self._databases: set[tuple[str, str]] = set()
        self._stemmer = threading.local()

    def _stem(self, word: str) -> str:
        st = getattr(self._stemmer, "s", None)
        if st is None:  # a Stemmer is not safe to share between threads
            st = self._stemmer.s = Stemmer.Stemmer("porter")
        return str(st.stemWord(word) or word)

    # ---- writes ---------------------------------------------------------------------------
    def ensure_database(self, org: str, database: str) -> bool:
        with self._lock:
            self._databases.add((org, database))
        return True

    def upsert(self, org: str, chunks: Sequence[ChunkDoc]) -> None:
        self.replace_items(org, (), chunks)

    def replace_items(self, org: str, items: Sequence[ItemKey], chunks: Sequence[ChunkDoc]) -> None:
        latest = {c.chunk_id: self._entry(c) for c in chunks}  # the last copy of a chunk id wins
        with self._lock:
            self._check_dims(org, list(latest.values()))
            for item in items:
                self._delete_where(org, lambda d, it=item: ItemKey(d.database, d.collection, d.store, d.item_id) == it)
            for chunk_id, entry in latest.items():
                self._chunks[(org, chunk_id)] = entry

    def _entry(self, c: ChunkDoc) -> _Entry:
        if c.store not in _STORES:
            raise ValueError(f"unknown store {c.store!r}")
        vector = None
        if c.vector is not None:
            vector = np.array(c.vector, dtype=np.float32).reshape(-1)
            if vector.size == 0:
                raise ValueError("a chunk vector must be one-dimensional and non-empty")
        title = [self._stem(w) for w in _words(c.title)]
        doc = replace(c, vector=vector, metadata=dict(c.metadata), additional_metadata=dict(c.additional_metadata))
        return _Entry(doc, tuple(title + [self._stem(w) for w in _words(c.text)]), len(title))

    def _check_dims(self, org: str, entries: list[_Entry]) -> None:
        """One vector dimension per (org, database, store); a batch that breaks it is refused whole."""
        incoming = {e.doc.chunk_id for e in entries}
        dims: dict[tuple[str, str], int] = {}
        for (o, chunk_id), e in self._chunks.items():
            if o == org and chunk_id not in incoming and e.doc.vector is not None:
                dims.setdefault((e.doc.database, e.doc.store), e.doc.vector.size)
        for e in entries:
            if e.doc.vector is None:
                continue
            want = dims.setdefault((e.doc.database, e.doc.store), e.doc.vector.size)
            if want != e.doc.vector.size:
                raise ValueError(
                    f"vector dimension {e.doc.vector.size} for chunk {e.doc.chunk_id!r} differs from {want}"
                )

    def _delete_where(self, org: str, pred: Any) -> int:
        doomed = [k for k, e in self._chunks.items() if k[0] == org and pred(e.doc)]
        for k in doomed:
            del self._chunks[k]
        return len(doomed)

    def delete_item(self, org: str, database: str, collection: str, store: Store, item_id: str) -> int:
        key = ItemKey(database, collection, store, item_id)
        with self._lock:
            return self._delete_where(org, lambda d: ItemKey(d.database, d.collection, d.store, d.item_id) == key)

    def delete_scope(self, org: str, database: str, collection: str | None) -> int:
        with self._lock:
            return self._delete_where(
                org, lambda d: d.database == database and (collection is None or d.collection == collection)
            )

    # ---- reads ----------------------------------------------------------------------------
    def _in_scope(self, org: str, flt: SearchFilter) -> list[_Entry]:
        if flt.item_ids is not None and not flt.item_ids:
            return []
        allowed = set(flt.item_ids) if flt.item_ids is not None else None
        collections = set(flt.collections)
        with self._lock:
            entries = [e for (o, _), e in self._chunks.items() if o == org]
        out = []
        for e in entries:
            d = e.doc
            if d.database != flt.database or d.store != flt.store or d.collection not in collections:
                continue
            if allowed is not None and d.item_id not in allowed:
                continue
            if _matches(d.metadata, flt.metadata) and _matches(d.additional_metadata, flt.additional_metadata):
                out.append(e)
        return out

    def keyword_search(self, org: str, flt: SearchFilter, query: str, *, limit: int, operator: str = "or") -> list[Hit]:
        if operator not in ("or", "and", "phrase"):
            raise ValueError(f"unknown keyword operator {operator!r}; use 'or', 'and' or 'phrase'")
        words = _words(query)
        if not words or limit <= 0:
            return []
        if operator == "or":
            words = [w for w in words if w not in ENGLISH_STOPWORDS] or words
        terms = list(dict.fromkeys(self._stem(w) for w in words))
        sequence = [self._stem(w) for w in _words(query)]
        scope = self._in_scope(org, flt)
        stats = self._collection_stats(org, flt, {e.doc.collection for e in scope}, terms)
        scored: list[Hit] = []
        for e in scope:
            tf = Counter(e.terms)
            if operator == "and" and not all(tf[t] for t in terms):
                continue
            if operator == "phrase" and not _has_phrase(e, sequence):
                continue
            n, avg, df = stats[e.doc.collection]
            score = 0.0
            for t in terms:
                if tf[t]:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    score += idf * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * len(e.terms) / avg))
            if score > 0:
                scored.append(Hit(e.doc.chunk_id, e.doc.item_id, e.doc.collection, score))
        scored.sort(key=lambda h: (-h.score, h.chunk_id))
        return scored[:limit]

    def _collection_stats(
        self, org: str, flt: SearchFilter, collections: set[str], terms: list[str]
    ) -> dict[str, tuple[int, float, Counter[str]]]:
        """bm25's document count, mean length and document frequencies, per collection (filters aside)."""
        with self._lock:
            everyone = [e for (o, _), e in self._chunks.items() if o == org]
        stats: dict[str, tuple[int, float, Counter[str]]] = {}
        for coll in collections:
            docs = [
                e
                for e in everyone
                if (e.doc.database, e.doc.store, e.doc.collection) == (flt.database, flt.store, coll)
            ]
            df: Counter[str] = Counter()
            for e in docs:
                df.update(set(e.terms) & set(terms))
            avg = max(1.0, sum(len(e.terms) for e in docs) / max(1, len(docs)))
            stats[coll] = (len(docs), avg, df)
        return stats

    def vector_search(
        self, org: str, flt: SearchFilter, vector: npt.NDArray[np.float32], *, limit: int, narrow: bool = False
    ) -> list[Hit]:
        if limit <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        scored = []
        for e in self._in_scope(org, flt):
            v = e.doc.vector
            if v is None:
                continue
            if v.size != query.size:
                raise ValueError(f"query vector has dimension {query.size}, the index holds {v.size}")
            scored.append(Hit(e.doc.chunk_id, e.doc.item_id, e.doc.collection, float(np.dot(v, query))))
        scored.sort(key=lambda h: (-h.score, h.chunk_id))
        return scored[:limit]

    def get_chunks(self, org: str, chunk_ids: Sequence[str]) -> list[ChunkDoc]:
        with self._lock:
            found = [self._chunks.get((org, cid)) for cid in chunk_ids]
        return [_copy(e.doc) for e in found if e is not None]

    def item_chunks(self, org: str, database: str, collection: str, store: Store, item_id: str) -> list[ChunkDoc]:
        key = ItemKey(database, collection, store, item_id)
        with self._lock:
            docs = [
                e.doc
                for (o, _), e in self._chunks.items()
                if o == org and ItemKey(e.doc.database, e.doc.collection, e.doc.store, e.doc.item_id) == key
            ]
        return [_copy(d) for d in sorted(docs, key=lambda d: (d.position, d.chunk_id))]

    def count(self, org: str, database: str, store: Store) -> int:
        with self._lock:
            return sum(
                1
                for (o, _), e in self._chunks.items()
                if o == org and (e.doc.database, e.doc.store) == (database, store)
            )


def _has_phrase(e: _Entry, sequence: list[str]) -> bool:
    """The stems in order, adjacent, inside the title or inside the text (a phrase does not span the two)."""
    n = len(sequence)
    for start, end in ((0, e.title_len), (e.title_len, len(e.terms))):
        field = e.terms[start:end]
        if any(list(field[i : i + n]) == sequence for i in range(len(field) - n + 1)):
            return True
    return False


def _copy(d: ChunkDoc) -> ChunkDoc:
    return replace(
        d,
        vector=None if d.vector is None else d.vector.copy(),
        metadata=dict(d.metadata),
        additional_metadata=dict(d.additional_metadata),
    )
