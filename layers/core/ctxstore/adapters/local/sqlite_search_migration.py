"""Upgrades of search index files written by earlier versions (run on open, once per file)."""

from __future__ import annotations

from collections import defaultdict

from ctxstore.adapters.local import keyword_df_copy as df_copy
from ctxstore.adapters.local import keyword_postings as kp
from ctxstore.adapters.local import keyword_terms as kt
from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_search_sql import KW_OLD_TRIGGERS, KW_SCHEMA, count_scopes, scope_id


def migrate_keywords(db: SqliteDb) -> None:
    """Index files written before per-scope keyword statistics: drop the table-wide FTS5 index, derive
    every chunk's scoped stems and the per-collection counts, build the new index. Once per file."""
    with db.write() as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(chunks)")}
        for col, kind in (
            ("kw_scope", "INTEGER"),
            ("kw_title", "TEXT"),
            ("kw_text", "TEXT"),
            ("kw_len", "INTEGER"),
        ):
            if col not in columns:
                conn.execute(f"ALTER TABLE chunks ADD COLUMN {col} {kind}")
        # Lengths by row id without reading the rows (a vector blob sits before kw_len in each one).
        conn.execute("CREATE INDEX IF NOT EXISTS chunks_kw_len ON chunks (id, kw_len)")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "chunks_fts" in tables:
            conn.execute("DROP TRIGGER IF EXISTS chunks_ai")
            conn.execute("DROP TRIGGER IF EXISTS chunks_ad")
            conn.execute("DROP TABLE chunks_fts")
        conn.execute(kp.DF_TABLE)
        df_copy.create(conn)
        for statement in KW_OLD_TRIGGERS:  # the index writes kw_fts itself now (sqlite_search_sql.KW_INSERT)
            conn.execute(statement)
        if "kw_fts" in tables:
            if "kw_df" not in tables:  # written before document frequencies had their own table
                kp.fill_doc_freqs(conn)
            return
        rows = conn.execute(
            "SELECT id, org, database, store, collection, title, text FROM chunks WHERE kw_len IS NULL"
        ).fetchall()
        counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for rowid, org, database, store, collection, title, text in rows:
            sid = scope_id(conn, org, database, store, collection)
            code = kt.scope_code(sid)
            title_terms, text_terms = kt.stems(title), kt.stems(text)
            length = len(title_terms) + len(text_terms)
            counts[sid][0] += 1
            counts[sid][1] += length
            conn.execute(
                "UPDATE chunks SET kw_scope=?, kw_title=?, kw_text=?, kw_len=? WHERE id=?",
                (sid, kt.scoped(code, title_terms), kt.scoped(code, text_terms), length, rowid),
            )
        count_scopes(conn, {sid: (n, t) for sid, (n, t) in counts.items()})
        for statement in KW_SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO kw_fts (kw_fts) VALUES ('rebuild')")
        kp.fill_doc_freqs(conn)
