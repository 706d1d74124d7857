"""A term-first copy of the keyword lane's document frequencies, read by queries into many collections.

`kw_df` is keyed by scoped token (collection code + stem): a write into a collection updates one run of it, but a
query into 100 collections looks up a token per (collection, term), ~900 B-tree lookups that were 1.9-2.0 ms of a
5.5 ms keyword lane at 1,000 collections of 1,000 chunks (issue 28 goal 7). Keyed by term instead, every write
would touch a page per distinct term (the fifth pass measured that regression). So both, like an LSM tree:

- writes keep `kw_df` as before, and take the collections they change out of `kw_clean` (one statement a write);
- while the index is idle (keyword_merge.py), the collections not in `kw_clean` are merged into `kw_tdf`: one row per
  (database, stem) holding two packed arrays, the collections whose chunks hold the stem (sorted ids) and its
  document count in each. `kw_df.merged` is each token's count as the copy has it, so a merge reads a collection's
  run of `kw_df` and rewrites only the stems whose count moved; a token whose count fell to 0 stays until merged.
  A collection with no token left to merge goes back into `kw_clean`, in the transaction that merged its last one;
- a query into many collections reads one `kw_tdf` row per stem for the collections in `kw_clean` and looks up the
  others' tokens in `kw_df` as before (`doc_freqs`). Only databases of MANY_SCOPES collections or more are copied:
  a query into fewer never reads the copy.

Everything lives in the index file and is read in the caller's snapshot: a collection is in `kw_clean` only while
every one of its tokens has `docs = merged`, and `kw_tdf` holds exactly the `merged` counts, so the copy answers what
`kw_df` would. A crash loses nothing: what is not merged is still `docs != merged`. A file written before the copy
existed has `merged` 0 everywhere and no clean collection: the first idle merges copy it whole (9.2M tokens at
1,000 collections of 1,000 chunks: 200 s in the background). Rows are grouped by database (`kw_groups`: org,
database, store), so a row's arrays hold that database's collections only, not every tenant's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from sqlite3 import Connection

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local import keyword_terms as kt

TABLES = (
    "CREATE TABLE IF NOT EXISTS kw_groups (id INTEGER PRIMARY KEY, org TEXT NOT NULL, database TEXT NOT NULL,"
    " store TEXT NOT NULL, UNIQUE (org, database, store))",
    "CREATE TABLE IF NOT EXISTS kw_tdf (grp INTEGER NOT NULL, term TEXT NOT NULL, scopes BLOB NOT NULL,"
    " docs BLOB NOT NULL, PRIMARY KEY (grp, term)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS kw_clean (scope INTEGER PRIMARY KEY)",
)
# A query into this many collections or more reads the copy; fewer look their tokens up (a few lookups each, and a
# copy row holds every collection of the database that has the stem).
MANY_SCOPES = 16
MERGE_BATCH = 50_000  # tokens merged in one transaction (~1 s; a writer waits for one at most)

_SCOPES = np.dtype("<u4")  # collection ids (kw_scopes.id; codes allow 36^6 < 2^32)
_DOCS = np.dtype("<i4")


def create(conn: Connection) -> None:
    """The copy's tables, and `kw_df.merged` on a file from before (its copy, if any, is then forgotten)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(kw_df)")}
    for statement in TABLES:
        conn.execute(statement)
    if "merged" not in columns:  # every count 0 as added: nothing copied (no scan of kw_df at the upgrade)
        conn.execute("ALTER TABLE kw_df ADD COLUMN merged INTEGER NOT NULL DEFAULT 0")
        conn.execute("DELETE FROM kw_tdf")
        conn.execute("DELETE FROM kw_clean")


def reset(conn: Connection) -> None:
    """Forget the copy (kw_df was rebuilt): every collection is merged again from its tokens."""
    conn.execute("DELETE FROM kw_tdf")
    conn.execute("DELETE FROM kw_clean")
    conn.execute("UPDATE kw_df SET merged = 0 WHERE merged != 0")


def note_changes(conn: Connection, scopes: Iterable[int]) -> None:
    """A write changed counts of these collections in kw_df: they are no longer clean."""
    ids = sorted(set(scopes))
    if ids:
        conn.execute("DELETE FROM kw_clean WHERE scope IN (SELECT value FROM json_each(?))", (json.dumps(ids),))


def _counts(conn: Connection, tokens: Sequence[str]) -> dict[str, int]:
    """kw_df's counts of those tokens that occur (keyword_postings.doc_freqs; not imported: that module notes its
    changes here)."""
    rows = conn.execute(
        "SELECT token, docs FROM kw_df WHERE token IN (SELECT value FROM json_each(?)) AND docs > 0",
        (json.dumps(list(tokens)),),
    )
    return {str(t): int(d) for t, d in rows}


def _group(conn: Connection, org: str, database: str, store: str, *, create: bool) -> int | None:
    row = conn.execute("SELECT id FROM kw_groups WHERE org=? AND database=? AND store=?", (org, database, store))
    found = row.fetchone()
    if found is not None or not create:
        return int(found[0]) if found is not None else None
    cur = conn.execute("INSERT INTO kw_groups (org, database, store) VALUES (?,?,?)", (org, database, store))
    return int(cur.lastrowid or 0)


def merge_pending(conn: Connection, limit: int = MERGE_BATCH) -> int:
    """Merge up to about `limit` moved tokens of collections not clean into the copy, in the caller's write
    transaction; answers how many tokens it read (0: every collection is clean)."""
    # Only databases with MANY_SCOPES collections or more: no query into fewer reads the copy (one large collection's
    # copy would double kw_df for nothing: 1M tokens, 20 s of merging at 1M chunks in one collection).
    dirty = conn.execute(
        "SELECT id, org, database, store FROM kw_scopes AS s WHERE id NOT IN (SELECT scope FROM kw_clean)"
        " AND (SELECT count(*) FROM kw_scopes AS t WHERE t.org = s.org AND t.database = s.database"
        " AND t.store = s.store) >= ? ORDER BY id",
        (MANY_SCOPES,),
    ).fetchall()
    changes: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    read = 0
    for scope, org, database, store in dirty:
        low, high = kt.scope_code(int(scope)), kt.scope_code(int(scope) + 1)  # fixed width: every token in between
        moved = conn.execute(
            "SELECT token, docs FROM kw_df WHERE token >= ? AND token < ? AND docs != merged ORDER BY token LIMIT ?",
            (low, high, limit - read + 1),
        ).fetchall()
        done = len(moved) <= limit - read
        moved = moved[: limit - read]
        if moved:
            group = _group(conn, str(org), str(database), str(store), create=True)
            assert group is not None
            for token, docs in moved:
                changes[(group, str(token)[kt.CODE_LEN :])].append((int(scope), int(docs)))
            last = str(moved[-1][0])
            conn.execute(
                "UPDATE kw_df SET merged = docs WHERE token >= ? AND token <= ? AND docs != merged", (low, last)
            )
            conn.execute("DELETE FROM kw_df WHERE token >= ? AND token <= ? AND docs = 0", (low, last))
        if done:
            conn.execute("INSERT OR IGNORE INTO kw_clean (scope) VALUES (?)", (int(scope),))
        read += len(moved) + 1
        if read >= limit:
            break
    for (group, term), changed in changes.items():
        _apply(conn, group, term, changed)
    return read


def _apply(conn: Connection, group: int, term: str, changed: list[tuple[int, int]]) -> None:
    """One stem's row: the changed collections' counts replaced (dropped at 0), kept sorted by collection."""
    row = conn.execute("SELECT scopes, docs FROM kw_tdf WHERE grp=? AND term=?", (group, term)).fetchone()
    ids = np.frombuffer(row[0], dtype=_SCOPES) if row is not None else np.zeros(0, dtype=_SCOPES)
    counts = np.frombuffer(row[1], dtype=_DOCS) if row is not None else np.zeros(0, dtype=_DOCS)
    new_ids = np.array([s for s, _ in changed], dtype=_SCOPES)
    new_counts = np.array([n for _, n in changed], dtype=_DOCS)
    keep = ~np.isin(ids, new_ids)
    add = new_counts > 0
    ids = np.concatenate([ids[keep], new_ids[add]])
    counts = np.concatenate([counts[keep], new_counts[add]])
    if ids.size == 0:
        conn.execute("DELETE FROM kw_tdf WHERE grp=? AND term=?", (group, term))
        return
    order = np.argsort(ids, kind="stable")
    conn.execute(
        "INSERT OR REPLACE INTO kw_tdf (grp, term, scopes, docs) VALUES (?,?,?,?)",
        (group, term, ids[order].tobytes(), counts[order].tobytes()),
    )


def doc_freqs(
    conn: Connection, org: str, database: str, store: str, scopes: Sequence[int], terms: Iterable[str]
) -> dict[str, int]:
    """The document count of every (collection, stem) token that occurs, as kp.doc_freqs answers for the tokens
    of `scopes` x `terms`: from the copy for clean collections, from kw_df for the others."""
    terms = list(terms)
    group = _group(conn, org, database, store, create=False)
    clean: npt.NDArray[np.uint32] = np.zeros(0, dtype=_SCOPES)
    if group is not None:
        rows = conn.execute(
            "SELECT scope FROM kw_clean WHERE scope IN (SELECT value FROM json_each(?)) ORDER BY scope",
            (json.dumps([int(s) for s in scopes]),),
        ).fetchall()
        clean = np.array([r[0] for r in rows], dtype=_SCOPES)
    clean_set = set(clean.tolist())
    dirty = [kt.scope_code(s) for s in scopes if s not in clean_set]
    out = _counts(conn, [code + t for code in dirty for t in terms]) if dirty else {}
    if clean.size == 0:
        return out
    rows = conn.execute(
        "SELECT term, scopes, docs FROM kw_tdf WHERE grp=? AND term IN (SELECT value FROM json_each(?))",
        (group, json.dumps(terms)),
    ).fetchall()
    for term, packed_ids, packed_docs in rows:
        ids = np.frombuffer(packed_ids, dtype=_SCOPES)
        at = np.minimum(np.searchsorted(ids, clean), ids.size - 1)
        hit = ids[at] == clean
        counts = np.frombuffer(packed_docs, dtype=_DOCS)[at[hit]]
        for scope, n in zip(clean[hit].tolist(), counts.tolist(), strict=True):
            out[kt.scope_code(scope) + str(term)] = int(n)
    return out
