"""Contract of a polled Scheduler (the local table and its fake): each due schedule fires once per interval.

EventBridge pushes instead (its `due` is always empty); tests/aws/test_eventbridge_scheduler.py covers it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contract.store_factories import SCHEDULERS

T0 = 1_800_000_000.0


@pytest.fixture(params=sorted(SCHEDULERS))
def scheduler(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    adapter, close = SCHEDULERS[request.param](tmp_path)
    yield adapter
    close()


def test_due_hands_out_a_schedule_once_per_interval(scheduler: Any) -> None:
    scheduler.upsert("o", "sync/a", every_s=60, next_at=T0, payload={"connector": "a"})
    assert scheduler.due(T0 - 1) == []
    [s] = scheduler.due(T0 + 5)
    assert (s.schedule_id, s.org, s.every_s, s.next_at, s.payload) == ("sync/a", "o", 60, T0, {"connector": "a"})
    assert scheduler.due(T0 + 5) == []  # advanced to now + interval as it was handed out
    assert scheduler.due(T0 + 64) == []
    [again] = scheduler.due(T0 + 65)
    assert again.next_at == T0 + 65


def test_due_is_in_time_order_and_limited(scheduler: Any) -> None:
    for i, at in enumerate([T0 + 3, T0 + 1, T0 + 2]):
        scheduler.upsert("o", f"s{i}", every_s=600, next_at=at, payload={"i": i})
    first = scheduler.due(T0 + 10, limit=2)
    assert [s.schedule_id for s in first] == ["s1", "s2"]
    assert [s.schedule_id for s in scheduler.due(T0 + 10)] == ["s0"]


def test_upsert_replaces_and_orgs_are_separate(scheduler: Any) -> None:
    scheduler.upsert("o1", "sync", every_s=60, next_at=T0, payload={"v": 1})
    scheduler.upsert("o2", "sync", every_s=60, next_at=T0, payload={"v": 2})
    scheduler.upsert("o1", "sync", every_s=120, next_at=T0 + 30, payload={"v": 3})  # re-anchored
    got = sorted((s.org, s.every_s, s.payload["v"]) for s in scheduler.due(T0 + 30))
    assert got == [("o1", 120, 3), ("o2", 60, 2)]


def test_cancel(scheduler: Any) -> None:
    scheduler.upsert("o", "sync", every_s=60, next_at=T0, payload={})
    assert scheduler.cancel("o2", "sync") is False
    assert scheduler.cancel("o", "sync") is True
    assert scheduler.cancel("o", "sync") is False
    assert scheduler.due(T0 + 1000) == []


def test_concurrent_pollers_fire_a_schedule_once(scheduler: Any) -> None:
    scheduler.upsert("o", "sync", every_s=3600, next_at=T0, payload={})
    fired: list[str] = []
    lock = threading.Lock()

    def poll() -> None:
        got = scheduler.due(T0 + 1)
        with lock:
            fired.extend(s.schedule_id for s in got)

    threads = [threading.Thread(target=poll) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fired == ["sync"]


def test_survives_reopen(tmp_path: Path) -> None:
    for name, factory in SCHEDULERS.items():
        folder = tmp_path / name
        folder.mkdir()
        s, close = factory(folder)
        s.upsert("o", "kept", every_s=60, next_at=T0, payload={"x": 1})
        close()
        s2, close2 = factory(folder)
        assert [x.payload for x in s2.due(T0)] == [{"x": 1}]
        close2()
