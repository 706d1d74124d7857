"""Contract of the RecordStore port; every adapter passes the same suite."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.records import ConditionFailed, Delete, Put
from ctxstore.services.items.locks import ITEM_LOCK, ItemLocks
from tests.contract.store_factories import RECORD_STORES


@pytest.fixture(params=sorted(RECORD_STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    adapter, close = RECORD_STORES[request.param](tmp_path)
    yield adapter
    close()


def test_put_get_roundtrip_and_versions(store: Any) -> None:
    r1 = store.put("org1", Put("item", "db/col", "a", {"x": 1, "nested": {"y": [1, 2]}}))
    assert r1.version == 1
    got = store.get("org1", "item", "db/col", "a")
    assert got is not None and got.data == {"x": 1, "nested": {"y": [1, 2]}} and got.version == 1
    r2 = store.put("org1", Put("item", "db/col", "a", {"x": 2}))
    assert r2.version == 2
    assert store.get("org1", "item", "db/col", "a").data == {"x": 2}


def test_missing_is_none(store: Any) -> None:
    assert store.get("org1", "item", "db", "nope") is None


def test_orgs_are_isolated(store: Any) -> None:
    store.put("org1", Put("database", "", "acme", {"o": 1}))
    assert store.get("org2", "database", "", "acme") is None
    assert store.query("org2", "database", "").records == []
    assert store.count("org2", "database", "") == 0


def test_if_absent_condition(store: Any) -> None:
    store.put("o", Put("k", "p", "s", {"v": 1}, if_absent=True))
    with pytest.raises(ConditionFailed):
        store.put("o", Put("k", "p", "s", {"v": 2}, if_absent=True))
    assert store.get("o", "k", "p", "s").data == {"v": 1}


def test_if_version_condition(store: Any) -> None:
    r = store.put("o", Put("k", "p", "s", {"v": 1}))
    store.put("o", Put("k", "p", "s", {"v": 2}, if_version=r.version))
    with pytest.raises(ConditionFailed):
        store.put("o", Put("k", "p", "s", {"v": 3}, if_version=r.version))
    assert store.get("o", "k", "p", "s").data == {"v": 2}


def test_delete_and_conditional_delete(store: Any) -> None:
    r = store.put("o", Put("k", "p", "s", {"v": 1}))
    with pytest.raises(ConditionFailed):
        store.delete("o", "k", "p", "s", if_version=r.version + 5)
    assert store.delete("o", "k", "p", "s", if_version=r.version) is True
    assert store.delete("o", "k", "p", "s") is False
    assert store.get("o", "k", "p", "s") is None


def test_query_order_prefix_and_paging(store: Any) -> None:
    for sk in ["b", "a", "c1", "c2", "d"]:
        store.put("o", Put("item", "P", sk, {"sk": sk}))
    store.put("o", Put("item", "Q", "zz", {}))
    page = store.query("o", "item", "P", limit=2)
    assert [r.sk for r in page.records] == ["a", "b"] and page.next_after == "b"
    page2 = store.query("o", "item", "P", limit=2, after=page.next_after)
    assert [r.sk for r in page2.records] == ["c1", "c2"]
    page3 = store.query("o", "item", "P", limit=2, after=page2.next_after)
    assert [r.sk for r in page3.records] == ["d"] and page3.next_after is None
    assert [r.sk for r in store.query("o", "item", "P", sk_prefix="c").records] == ["c1", "c2"]
    assert [r.sk for r in store.query("o", "item", "P", descending=True, limit=2).records] == ["d", "c2"]
    assert store.count("o", "item", "P") == 5
    assert store.count("o", "item", "P", sk_prefix="c") == 2


def test_prefix_with_like_metacharacters(store: Any) -> None:
    store.put("o", Put("item", "P", "a%b", {}))
    store.put("o", Put("item", "P", "axb", {}))
    store.put("o", Put("item", "P", "a_c", {}))
    assert [r.sk for r in store.query("o", "item", "P", sk_prefix="a%").records] == ["a%b"]
    assert [r.sk for r in store.query("o", "item", "P", sk_prefix="a_").records] == ["a_c"]


def test_transact_is_all_or_nothing(store: Any) -> None:
    store.put("o", Put("k", "p", "exists", {"v": 1}))
    with pytest.raises(ConditionFailed):
        store.transact("o", [Put("k", "p", "new", {"v": 1}), Put("k", "p", "exists", {"v": 2}, if_absent=True)])
    assert store.get("o", "k", "p", "new") is None
    assert store.get("o", "k", "p", "exists").data == {"v": 1}
    store.transact("o", [Put("k", "p", "new", {"v": 1}), Delete("k", "p", "exists")])
    assert store.get("o", "k", "p", "new") is not None
    assert store.get("o", "k", "p", "exists") is None


def test_expired_records_are_absent(store: Any) -> None:
    store.put("o", Put("k", "p", "old", {"v": 1}, expires_at=1.0))
    assert store.get("o", "k", "p", "old") is None
    assert store.query("o", "k", "p").records == []
    store.put("o", Put("k", "p", "old", {"v": 2}, if_absent=True))  # expired counts as absent
    assert store.get("o", "k", "p", "old").data == {"v": 2}


def test_get_many_reads_the_live_records_of_many_keys(store: Any) -> None:
    for i in range(130):  # past DynamoDB's 100 keys a BatchGetItem call
        store.put("o", Put("item", f"db/{i % 3}", f"id{i}", {"n": i}))
    store.put("o", Put("item", "db/0", "gone", {"n": -1}, expires_at=1.0))
    store.put("other", Put("item", "db/0", "id0", {"n": "another org"}))
    store.put("o", Put("lock", "db/0", "id0", {"n": "another kind"}))
    wanted = [(f"db/{i % 3}", f"id{i}") for i in range(130)]
    keys = [*wanted, ("db/0", "gone"), ("db/1", "id0"), ("db/9", "nope"), wanted[5]]  # a key repeated
    got = store.get_many("o", "item", keys)
    assert set(got) == set(wanted)
    assert all(got[(pk, sk)].data == {"n": int(sk[2:])} and got[(pk, sk)].pk == pk for pk, sk in wanted)
    assert got[wanted[7]].version == 1 and got[wanted[7]].sk == "id7" and got[wanted[7]].kind == "item"
    assert store.get_many("o", "item", []) == {}


def test_delete_partitions_by_prefix(store: Any) -> None:
    store.put("o", Put("item", "db1/a", "1", {}))
    store.put("o", Put("item", "db1/b", "2", {}))
    store.put("o", Put("item", "db10/a", "3", {}))
    store.put("o2", Put("item", "db1/a", "4", {}))
    assert store.delete_partitions("o", "item", "db1/") == 2
    assert store.count("o", "item", "db10/a") == 1
    assert store.count("o2", "item", "db1/a") == 1


def test_concurrent_conditional_writers_one_wins(store: Any) -> None:
    wins: list[int] = []
    errors: list[BaseException] = []

    def claim(i: int) -> None:
        try:
            store.put("o", Put("lock", "", "x", {"owner": i}, if_absent=True))
            wins.append(i)
        except ConditionFailed:
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(wins) == 1
    assert store.get("o", "lock", "", "x").data == {"owner": wins[0]}


def test_concurrent_version_increments_are_not_lost(store: Any) -> None:
    store.put("o", Put("counter", "", "c", {"n": 0}))

    def bump() -> None:
        for _ in range(20):
            while True:
                cur = store.get("o", "counter", "", "c")
                try:
                    store.put("o", Put("counter", "", "c", {"n": cur.data["n"] + 1}, if_version=cur.version))
                    break
                except ConditionFailed:
                    continue

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get("o", "counter", "", "c").data["n"] == 80


def test_item_lock_excludes_writers_and_frees_an_expired_lease(store: Any) -> None:
    """services/items/locks.py rests on if_absent + expires_at: one holder at a time, a dead holder's lease ends."""
    locks = ItemLocks(store, lease_s=30)
    inside: list[int] = []
    overlaps: list[int] = []

    def worker(n: int) -> None:
        for _ in range(5):
            with locks.hold("o", "pk", "x", wait_s=30):
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(n)
                time.sleep(0.001)
                inside.remove(n)

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert overlaps == []
    # A holder that died: its lease record stays until it expires, then the item is free again.
    store.put("o", Put(ITEM_LOCK, "pk", "y", {"owner": "dead"}, if_absent=True, expires_at=time.time() + 0.3))
    with pytest.raises(StoreUnavailable), ItemLocks(store).hold("o", "pk", "y", wait_s=0.05):
        pass
    time.sleep(0.35)
    with ItemLocks(store).hold("o", "pk", "y", wait_s=1):
        assert store.get("o", ITEM_LOCK, "pk", "y").data["owner"] != "dead"
    assert store.get("o", ITEM_LOCK, "pk", "y") is None  # released


def test_item_lock_of_an_earlier_process_is_taken_over_locally_only(store: Any) -> None:
    """A server killed with -9 leaves its locks; locally (one process per data dir) the next process takes them
    over at once, while on AWS (many processes) only the lease frees them."""
    store.put(
        "o", Put(ITEM_LOCK, "pk", "z", {"owner": "x", "boot": "killed"}, if_absent=True, expires_at=time.time() + 60)
    )
    with pytest.raises(StoreUnavailable), ItemLocks(store, single_process=False).hold("o", "pk", "z", wait_s=0.05):
        pass
    with ItemLocks(store, single_process=True).hold("o", "pk", "z", wait_s=0.05):
        assert store.get("o", ITEM_LOCK, "pk", "z").data["boot"] != "killed"


def test_item_locks_held_together_exclude_single_holders_and_wait_for_a_taken_one(store: Any) -> None:
    """hold_many (a worker's batch): one write takes every free lock; a taken one is waited for; all are
    released after, and a single holder of any of them waits meanwhile."""
    locks = ItemLocks(store, lease_s=30)
    keys = [("pk", "b"), ("pk", "a"), ("pk2", "a")]
    with locks.hold_many("o", keys, wait_s=5):
        for pk, sk in keys:
            assert store.get("o", ITEM_LOCK, pk, sk) is not None
        with pytest.raises(StoreUnavailable), locks.hold("o", "pk", "a", wait_s=0.05):
            pass
    for pk, sk in keys:
        assert store.get("o", ITEM_LOCK, pk, sk) is None
    # One of them held by someone else: the batch waits for it, then holds all.
    got: list[bool] = []
    with locks.hold("o", "pk", "b", wait_s=1):

        def batch() -> None:
            with locks.hold_many("o", keys, wait_s=10):
                got.append(all(store.get("o", ITEM_LOCK, pk, sk) is not None for pk, sk in keys))

        t = threading.Thread(target=batch, daemon=True)
        t.start()
        time.sleep(0.2)
        assert got == []
    t.join(20)
    assert got == [True]
    assert all(store.get("o", ITEM_LOCK, pk, sk) is None for pk, sk in keys)
    # A lock it cannot get in time: none of the others stays held.
    with locks.hold("o", "pk2", "a", wait_s=1):
        with pytest.raises(StoreUnavailable), locks.hold_many("o", keys, wait_s=0.1):
            pass
        assert store.get("o", ITEM_LOCK, "pk", "a") is None and store.get("o", ITEM_LOCK, "pk", "b") is None
