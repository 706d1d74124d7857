"""Contract of the WorkQueue port: durable, leased, de-duplicated, retried, dead-lettered."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contract.store_factories import WORK_QUEUES


@pytest.fixture(params=sorted(WORK_QUEUES))
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    adapter, close = WORK_QUEUES[request.param](tmp_path)
    yield adapter
    close()


def test_enqueue_claim_complete(queue: Any) -> None:
    assert queue.enqueue("o", "q", "j1", {"a": 1}) is True
    assert queue.pending("q") == 1
    [job] = queue.claim("q", lease_s=30)
    assert job.job_id == "j1" and job.org == "o" and job.payload == {"a": 1} and job.attempts == 1
    assert queue.claim("q", lease_s=30) == []  # leased jobs are not handed out twice
    queue.complete(job)
    assert queue.pending("q") == 0


def test_duplicate_job_id_is_a_noop(queue: Any) -> None:
    assert queue.enqueue("o", "q", "j1", {"a": 1})
    assert queue.enqueue("o", "q", "j1", {"a": 2}) is False
    [job] = queue.claim("q", lease_s=30)
    assert job.payload == {"a": 1}
    assert queue.enqueue("o", "q", "j1", {"a": 3}) is False  # still running


def test_queues_are_separate(queue: Any) -> None:
    queue.enqueue("o", "q1", "j", {})
    assert queue.claim("q2", lease_s=30) == []
    assert len(queue.claim("q1", lease_s=30)) == 1


def test_expired_lease_is_handed_out_again(queue: Any) -> None:
    queue.enqueue("o", "q", "j1", {})
    [first] = queue.claim("q", lease_s=0.05)
    time.sleep(0.1)
    [second] = queue.claim("q", lease_s=30)
    assert second.job_id == "j1" and second.attempts == 2
    queue.complete(first)  # a stale worker's ack must not remove the new lease
    assert queue.pending("q") == 1
    queue.complete(second)
    assert queue.pending("q") == 0


def test_retry_with_delay(queue: Any) -> None:
    queue.enqueue("o", "q", "j1", {})
    [job] = queue.claim("q", lease_s=30)
    queue.retry(job, delay_s=0.1, error="E6001: transient")
    assert queue.claim("q", lease_s=30) == []
    time.sleep(0.15)
    [again] = queue.claim("q", lease_s=30)
    assert again.attempts == 2


def test_delayed_enqueue_and_fifo_order(queue: Any) -> None:
    queue.enqueue("o", "q", "late", {}, delay_s=0.2)
    queue.enqueue("o", "q", "a", {})
    time.sleep(0.01)
    queue.enqueue("o", "q", "b", {})
    jobs = queue.claim("q", lease_s=30, limit=10)
    assert [j.job_id for j in jobs] == ["a", "b"]


def test_fail_dead_letters(queue: Any) -> None:
    queue.enqueue("o", "q", "j1", {})
    [job] = queue.claim("q", lease_s=30)
    queue.fail(job, error="boom")
    assert queue.pending("q") == 0
    assert queue.claim("q", lease_s=30) == []
    assert queue.enqueue("o", "q", "j1", {"again": True}) is True  # a dead job can be resubmitted


def test_survives_reopen(tmp_path: Path) -> None:
    for name, factory in WORK_QUEUES.items():
        folder = tmp_path / name
        folder.mkdir()
        q, close = factory(folder)
        q.enqueue("o", "q", "persist", {"x": 1})
        close()
        q2, close2 = factory(folder)
        [job] = q2.claim("q", lease_s=30)
        assert job.payload == {"x": 1}
        close2()


def test_local_queue_releases_leases_of_a_dead_server(tmp_path: Path) -> None:
    from ctxstore.adapters.local.sqlite_db import SqliteDb
    from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue

    q = SqliteWorkQueue(SqliteDb(tmp_path / "q.db"))
    q.enqueue("o", "q", "j", {})
    q.claim("q", lease_s=600)
    assert q.claim("q", lease_s=600) == []
    assert q.release_leases() == 1
    [job] = q.claim("q", lease_s=600)
    assert job.attempts == 2


def test_enqueue_many_and_complete_many(queue: Any) -> None:
    assert queue.enqueue("o", "q", "j1", {"a": 0})
    queued = queue.enqueue_many("o", "q", [("j1", {"a": 1}), ("j2", {"a": 2}), ("j3", {"a": 3})])
    assert queued == [False, True, True]  # j1 was queued already: kept as it was
    jobs = queue.claim("q", lease_s=30, limit=10)
    assert {j.job_id: j.payload for j in jobs} == {"j1": {"a": 0}, "j2": {"a": 2}, "j3": {"a": 3}}
    assert all(j.org == "o" for j in jobs)
    queue.complete_many([j for j in jobs if j.job_id != "j2"])
    assert queue.pending("q") == 1
    queue.complete_many([j for j in jobs if j.job_id == "j2"])
    assert queue.pending("q") == 0
    queue.complete_many([])
