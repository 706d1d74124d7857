"""Per-key token buckets: 429 with Retry-After; query and subgraph share one class."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.app import LocalApp, make_app


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "d", rate_limit_per_minute=3, rate_limit_burst=3, query_rate_limit_per_minute=2)
    yield la
    la.close()


def test_off_by_default(local: LocalApp) -> None:
    assert all(local.client.get("/databases", headers=local.headers()).status_code == 200 for _ in range(50))


def test_default_class_429_with_retry_after(limited: LocalApp) -> None:
    codes = [limited.client.get("/databases", headers=limited.headers()).status_code for _ in range(3)]
    assert codes == [200, 200, 200]
    r = limited.client.get("/databases", headers=limited.headers())
    assert r.status_code == 429
    assert r.json()["error"]["code"] == "RATE_LIMITED" and r.json()["success"] is False
    assert int(r.headers["retry-after"]) >= 1


def test_buckets_are_per_key(limited: LocalApp) -> None:
    for _ in range(3):
        limited.client.get("/databases", headers=limited.headers())
    assert limited.client.get("/databases", headers=limited.headers()).status_code == 429
    fresh = limited.services.keys.create("default")
    assert limited.client.get("/databases", headers=limited.headers(fresh)).status_code == 200


def test_subgraph_costs_the_same_as_query(limited: LocalApp) -> None:
    # Both count against the `query` bucket (burst 3 here); the default bucket is untouched.
    h = limited.headers()
    first = limited.client.post("/query", json={"database": "x", "query": "q"}, headers=h)
    second = limited.client.get("/context/abc/subgraph", params={"database": "x"}, headers=h)
    third = limited.client.get("/context/subgraph", params={"database": "x", "id": "a"}, headers=h)
    assert 429 not in (first.status_code, second.status_code, third.status_code)
    r = limited.client.post("/query", json={"database": "x", "query": "q"}, headers=h)
    assert r.status_code == 429 and "query" in r.json()["error"]["message"]
    r = limited.client.get("/context/abc/subgraph", params={"database": "x"}, headers=h)
    assert r.status_code == 429
    assert limited.client.get("/databases", headers=h).status_code == 200
