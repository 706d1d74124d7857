"""Ingestion end to end with its faults: webhooks see every status change; storage errors retry and clear."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.pipeline.jobs import queue_specs
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.pipeline.retry_policy import RetryPolicy
from tests.api.test_webhooks import FAST_RETRIES, Receiver, pump, receiver  # noqa: F401  (receiver: fixture)
from tests.support.app import LocalApp, make_app


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "data", **FAST_RETRIES)
    fast = RetryPolicy(max_attempts=3, interval_s=0.01, backoff_rate=1.0, jitter=False)
    la.runner = LocalRunner(la.container.queue, queue_specs(la.services, ingest_retry=fast))
    la.create_ready_database("acme")
    yield la
    la.close()


def _ingest(la: LocalApp, item_id: str) -> None:
    items = [{"id": item_id, "title": "T", "type": "note", "content": {"text": "Retries and webhooks are tested."}}]
    r = la.client.post(
        "/context/ingest", data={"database": "acme", "app_knowledge": json.dumps(items)}, headers=la.headers()
    )
    assert r.status_code == 202


def _status(la: LocalApp, item_id: str) -> dict[str, Any]:
    r = la.client.get("/context/status", params={"database": "acme", "ids": item_id}, headers=la.headers())
    return r.json()["data"]["statuses"][0]  # type: ignore[no-any-return]


def test_every_status_change_reaches_the_webhook_signed(app: LocalApp, receiver: Receiver) -> None:  # noqa: F811
    r = app.client.post(
        "/webhooks/indexing", json={"url": receiver.url, "generate_signing_secret": True}, headers=app.headers()
    )
    secret = r.json()["signing_secret"]
    _ingest(app, "doc1")
    pump(app, lambda: receiver.count() >= 4)
    hook = Webhook(secret)
    events = [hook.verify(req.body, req.headers) for req in receiver.requests]
    statuses = [e["data"]["indexing_status"] for e in events if e["data"]["id"] == "doc1"]
    assert statuses == ["queued", "processing", "graph_creation", "completed"]
    assert {e["type"] for e in events} == {"indexing.status_changed"}
    assert events[-1]["data"]["database"] == "acme" and events[-1]["data"]["error_code"] == ""


class FlakyIndex:
    """Wraps the real index; its writes fail `failures` times, as a storage outage would."""

    def __init__(self, inner: Any, failures: int) -> None:
        self.inner, self.failures = inner, failures

    def _fail(self) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise StoreUnavailable("vector store write timed out")

    def upsert(self, org: str, chunks: Any) -> None:
        self._fail()
        self.inner.upsert(org, chunks)

    def replace_items(self, org: str, items: Any, chunks: Any) -> None:  # the worker's batch write
        self._fail()
        self.inner.replace_items(org, items, chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_transient_storage_error_is_retried_and_clears(app: LocalApp) -> None:
    app.container.search_index = FlakyIndex(app.container.search_index, failures=2)  # type: ignore[assignment]
    _ingest(app, "doc2")
    pump(app, lambda: _status(app, "doc2")["indexing_status"] == "completed")
    assert _status(app, "doc2")["error_code"] == ""


def test_exhausted_retries_end_errored_with_e6001(app: LocalApp) -> None:
    app.container.search_index = FlakyIndex(app.container.search_index, failures=99)  # type: ignore[assignment]
    _ingest(app, "doc3")
    pump(app, lambda: _status(app, "doc3")["indexing_status"] == "errored")
    st = _status(app, "doc3")
    assert st["error_code"] == "E6001" and st["success"] is False and "timed out" in st["error_message"]
