"""CtxstoreClient.wait_for polls the pending ids oldest first (client/status_polls.py), against a fake
`GET /context/status` whose items finish in the order they were queued, `per_poll` of them between polls."""

from __future__ import annotations

import httpx
import pytest

from ctxstore.client import client as client_module
from ctxstore.client.client import STATUS_IDS_PER_CALL, CtxstoreClient
from ctxstore.client.transport import Transport


class QueueInOrder:
    """The status endpoint of a server that indexes its queue front to back."""

    def __init__(self, ids: list[str], per_poll: int, unknown: frozenset[str] = frozenset()) -> None:
        self.position = {i: n for n, i in enumerate(ids)}
        self.per_poll = per_poll
        self.unknown = unknown
        self.finished = 0
        self.calls: list[list[str]] = []

    def advance(self, _seconds: float) -> None:  # the client's sleep between polls: the workers move on
        self.finished += self.per_poll

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/context/status"
        asked = request.url.params["ids"].split(",")
        self.calls.append(asked)
        statuses = [
            {"id": i, "indexing_status": "completed" if self.position[i] < self.finished else "queued"}
            for i in asked
            if i not in self.unknown
        ]
        return httpx.Response(200, json={"success": True, "data": {"statuses": statuses}, "error": None})


def _client(server: QueueInOrder) -> CtxstoreClient:
    http = httpx.Client(base_url="http://fake", transport=httpx.MockTransport(server.handle))
    return CtxstoreClient("http://fake", "key", database="db", transport=Transport("http://fake", "key", http=http))


def test_a_poll_asks_oldest_first_and_stops_where_nothing_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [f"item-{n:04d}" for n in range(1000)]
    server = QueueInOrder(ids, per_poll=150)
    monkeypatch.setattr(client_module.time, "sleep", server.advance)
    seen: list[int] = []
    statuses = _client(server).wait_for(ids, on_update=lambda s: seen.append(sum(x.done for x in s)))
    assert [s.id for s in statuses] == ids and all(s.indexing_status == "completed" for s in statuses)
    assert seen == sorted(seen) and seen[-1] == 1000  # progress only grows, to all of them
    # Every call asks for the oldest ids not yet seen done, and a poll ends at the first call with none done:
    # 20 calls here, where asking for every pending id on each poll took 50 (10 + 10 + 9 + 7 + ... calls of 100).
    assert len(server.calls) == 20
    assert all(len(call) <= STATUS_IDS_PER_CALL for call in server.calls)
    for call in server.calls:
        assert call == sorted(call)


def test_a_timeout_still_answers_for_every_id(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [f"item-{n:04d}" for n in range(250)]
    server = QueueInOrder(ids, per_poll=0, unknown=frozenset({"item-0249"}))
    monkeypatch.setattr(client_module.time, "sleep", server.advance)
    statuses = _client(server).wait_for(ids, timeout=0)
    # The poll stopped after the first call (nothing done); the ids it never reached are asked once more.
    assert [s.id for s in statuses] == ids
    assert [s.indexing_status for s in statuses[:249]] == ["queued"] * 249
    assert statuses[249].error_code == "FILE_NOT_FOUND" and statuses[249].done
    assert [len(c) for c in server.calls] == [100, 100, 50]
