"""Counts of records by one field's value, kept by triggers in the records' own transactions (items by status).

`/metrics` reports items by status. Counting them read every item record's JSON: 6.9 s at 1.1M items
(an index on the extracted status still 1.3-1.5 s: SQLite 3.40 reads each row's body to return the expression),
once a minute under a scraper, and a first scrape past a 5 s client timeout. Triggers on `records` keep the
counts instead, so a scrape reads a few rows. A data dir written before them is counted once, when the tally
table is created, in the transaction that creates the triggers (so no write falls between the count and them).
"""

from __future__ import annotations

from sqlite3 import Connection

# (kind, top-level field) pairs counted; the pair is part of the triggers' SQL, so it must be a plain name.
TALLIED = (("item", "status"),)

_TABLE = (
    "CREATE TABLE record_tallies (kind TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL,"
    " n INTEGER NOT NULL, PRIMARY KEY (kind, field, value)) WITHOUT ROWID"
)


def _triggers(kind: str, field: str) -> list[str]:
    value = "json_extract({row}.body, '$.{field}')"
    new, old = value.format(row="new", field=field), value.format(row="old", field=field)
    add = (
        f"INSERT INTO record_tallies (kind, field, value, n) VALUES ('{kind}', '{field}', {new}, 1)"
        " ON CONFLICT (kind, field, value) DO UPDATE SET n = n + 1;"
    )
    remove = (
        f"UPDATE record_tallies SET n = n - 1 WHERE kind = '{kind}' AND field = '{field}' AND value = {old};"
        f" DELETE FROM record_tallies WHERE kind = '{kind}' AND field = '{field}' AND value = {old} AND n <= 0;"
    )
    name = f"tally_{kind}_{field}"
    return [
        f"CREATE TRIGGER {name}_insert AFTER INSERT ON records"
        f" WHEN new.kind = '{kind}' AND {new} IS NOT NULL BEGIN {add} END",
        f"CREATE TRIGGER {name}_delete AFTER DELETE ON records"
        f" WHEN old.kind = '{kind}' AND {old} IS NOT NULL BEGIN {remove} END",
        f"CREATE TRIGGER {name}_update_old AFTER UPDATE OF body ON records"
        f" WHEN old.kind = '{kind}' AND {old} IS NOT NULL AND {old} IS NOT {new} BEGIN {remove} END",
        f"CREATE TRIGGER {name}_update_new AFTER UPDATE OF body ON records"
        f" WHEN new.kind = '{kind}' AND {new} IS NOT NULL AND {old} IS NOT {new} BEGIN {add} END",
    ]


def ensure(conn: Connection) -> None:
    """Create the table, its triggers and the first counts when missing; call inside a write transaction."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='record_tallies'").fetchone():
        return
    conn.execute(_TABLE)
    for kind, field in TALLIED:
        for statement in _triggers(kind, field):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO record_tallies (kind, field, value, n) SELECT ?, ?, v, COUNT(*) FROM"
            " (SELECT json_extract(body, ?) AS v FROM records WHERE kind = ?) WHERE v IS NOT NULL GROUP BY v",
            (kind, field, "$." + field, kind),
        )


def counts(conn: Connection, kind: str, field: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT value, n FROM record_tallies WHERE kind = ? AND field = ? AND n > 0", (kind, field)
    ).fetchall()
    return {str(v): int(n) for v, n in rows}
