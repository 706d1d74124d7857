"""Items by status for /metrics come from counts the records' own writes keep (record_tallies.py), not a scan of
every item's JSON (6.9 s at 1.1M items): they must equal the scan after any mix of writes, failed ones included,
and a data dir written before the counts existed is counted when it is opened."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_records import SqliteRecordStore
from ctxstore.ports.records import ConditionFailed, Delete, Put

STATUSES = ["queued", "indexing", "completed", "errored"]


def _scanned(db: SqliteDb) -> dict[str, int]:
    rows = db.conn.execute(
        "SELECT json_extract(body, '$.status'), COUNT(*) FROM records WHERE kind='item' GROUP BY 1"
    ).fetchall()
    return {str(v): int(n) for v, n in rows if v is not None}


def _random_writes(store: SqliteRecordStore, rng: random.Random, n: int) -> None:
    for _ in range(n):
        org = rng.choice(["o1", "o2"])
        pk, sk = rng.choice(["db1#c", "db2#c"]), f"i{rng.randrange(30)}"
        roll = rng.random()
        if roll < 0.55:
            data = {"status": rng.choice(STATUSES), "title": "t"} if rng.random() < 0.9 else {"title": "no status"}
            store.put(org, Put("item", pk, sk, data))
        elif roll < 0.7:
            store.delete(org, "item", pk, sk)
        elif roll < 0.8:  # another kind with a status field: not counted
            store.put(org, Put("job", pk, sk, {"status": "queued"}))
        elif roll < 0.9:  # a transaction that fails half-way: nothing of it stays, counts included
            with pytest.raises(ConditionFailed):
                store.transact(
                    org,
                    [
                        Put("item", pk, f"{sk}-x", {"status": "queued"}),
                        Put("item", pk, sk, {"status": "completed"}, if_version=10_000),
                    ],
                )
        else:
            store.transact(
                org, [Put("item", pk, sk, {"status": "completed"}), Delete("item", pk, f"i{rng.randrange(30)}")]
            )


def test_counts_by_status_equal_a_scan_after_puts_updates_deletes_and_failed_transactions(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "records.db")
    store = SqliteRecordStore(db)
    rng = random.Random(3)
    for round_ in range(4):
        _random_writes(store, rng, 150)
        counted = store.count_by("item", "status")
        assert counted == _scanned(db), round_
        assert sum(counted.values()) > 0
    store.delete_partitions("o1", "item", "db1")
    assert store.count_by("item", "status") == _scanned(db)
    assert store.count_by("job", "status") == {
        "queued": db.conn.execute("SELECT COUNT(*) FROM records WHERE kind='job'").fetchone()[0]
    }  # not a tallied pair: still answered by the scan
    db.close()


def test_a_data_dir_written_before_the_counts_is_counted_when_opened(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "records.db")
    store = SqliteRecordStore(db)
    _random_writes(store, random.Random(8), 200)
    expected = _scanned(db)
    with db.write() as conn:  # as a data dir from before: no table, no triggers
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP TABLE record_tallies")
    store.put("o1", Put("item", "db1#c", "late", {"status": "queued"}))  # written with no triggers
    expected["queued"] = expected.get("queued", 0) + 1
    db.close()

    db = SqliteDb(tmp_path / "records.db")
    store = SqliteRecordStore(db)
    assert store.count_by("item", "status") == expected
    store.put("o2", Put("item", "db2#c", "later", {"status": "errored"}))
    assert store.count_by("item", "status") == _scanned(db)
    db.close()


def test_counting_reads_the_counts_not_every_item(tmp_path: Path) -> None:
    """What a scrape costs does not grow with the items: SQLite's own instruction count, at 3,000 items."""
    db = SqliteDb(tmp_path / "records.db")
    store = SqliteRecordStore(db)
    for b in range(30):
        store.transact("o1", [Put("item", "db1#c", f"i{b}-{i}", {"status": STATUSES[i % 4]}) for i in range(100)])
    steps = [0]

    def count_step() -> int:
        steps[0] += 1
        return 0

    db.conn.set_progress_handler(count_step, 1)
    try:
        counted = store.count_by("item", "status")
    finally:
        db.conn.set_progress_handler(None, 1)
    assert counted == {s: 750 for s in STATUSES}
    assert steps[0] < 300, steps[0]  # a scan of the 3,000 bodies takes tens of thousands
    db.close()
