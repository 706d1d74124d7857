"""GET /metrics of the local server (issue 27, part 5): what it counts, from a real local app, and who may read it.

Requests by route template and status with latency histograms, admission refusals, queue depth by state, items
by indexing status, pipeline step and query lane time, webhook delivery outcomes; no tenant data in labels.
Connector syncs and rate-limit waits: tests/ops/test_serve_observed.py (a real server on the fake Slack API).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ctxstore.http.middleware import ConventionsMiddleware
from tests.ops.observed import ObservedApp, Receiver, observed_app, receiver, sample

REQUESTS = "ctxstore_http_requests_total"
LATENCY = "ctxstore_http_request_duration_seconds"


@pytest.fixture
def oa(tmp_path: Path) -> Iterator[ObservedApp]:
    app = observed_app(tmp_path / "data", allow_private_webhooks=True, webhook_retry_interval_s=0.01)
    yield app
    app.close()


@pytest.fixture
def hook() -> Iterator[Receiver]:
    yield from receiver()


def test_requests_by_route_template_status_and_latency(oa: ObservedApp) -> None:
    assert oa.client.get("/databases", headers=oa.headers()).status_code == 200
    assert oa.client.get("/connectors/conn-secret-id", headers=oa.headers()).status_code == 404
    assert oa.client.get("/databases").status_code == 401  # no key: counted, org unknown
    assert oa.client.get("/no/such/path/tok-123", headers=oa.headers()).status_code == 404
    m = oa.scrape()
    assert sample(m, REQUESTS, route="/databases", method="GET", status="200") == 1
    assert sample(m, REQUESTS, route="/databases", method="GET", status="401") == 1
    assert sample(m, REQUESTS, route="/connectors/{connector_id}", method="GET", status="404") == 1
    assert sample(m, REQUESTS, route="unmatched", method="GET", status="404") == 1
    assert sample(m, LATENCY + "_count", route="/databases", method="GET") == 2
    assert sample(m, LATENCY + "_bucket", route="/databases", method="GET", le="+Inf") == 2
    assert sample(m, LATENCY + "_sum", route="/databases", method="GET") > 0
    text = oa.client.get("/metrics").text
    # Labels are templates: no id from a path, no organisation, no key.
    for secret in ("conn-secret-id", "tok-123", "default", oa.key.split("_")[1]):
        assert secret not in text


def test_queue_items_pipeline_steps_and_query_lanes(oa: ObservedApp) -> None:
    r = oa.client.post("/databases", json={"database": "acme"}, headers=oa.headers())
    assert r.status_code == 202
    queued = oa.scrape()
    assert (
        sum(v for (name, labels), v in queued.items() if name == "ctxstore_queue_jobs" and ("state", "ready") in labels)
        >= 1
    )
    oa.drain()
    oa.ingest_text("doc-private-1", "Invoices are emailed to customers on the first business day of each month.")
    waiting = oa.scrape()
    assert sample(waiting, "ctxstore_items", status="queued") == 1
    oa.drain()
    r = oa.client.post("/query", json={"database": "acme", "query": "when are invoices emailed"}, headers=oa.headers())
    assert r.status_code == 200 and r.json()["data"]["chunks"]
    m = oa.scrape()
    assert sample(m, "ctxstore_items", status="completed") == 1 and sample(m, "ctxstore_items", status="queued") == 0
    assert not [k for k, v in m.items() if k[0] == "ctxstore_queue_jobs" and v > 0]  # every job done
    for step in ("parse", "chunk", "embed", "index", "graph"):
        assert sample(m, "ctxstore_pipeline_step_duration_seconds_count", step=step) >= 1, step
    for lane in ("keyword", "embed", "vector"):
        assert sample(m, "ctxstore_query_lane_duration_seconds_count", lane=lane) == 1, lane
    assert sample(m, REQUESTS, route="/query", method="POST", status="200") == 1
    text = oa.client.get("/metrics").text
    assert "doc-private-1" not in text and "acme" not in text


def test_webhook_delivery_outcomes(oa: ObservedApp, hook: Receiver) -> None:
    r = oa.client.post("/webhooks/indexing", json={"url": hook.url}, headers=oa.headers())
    assert r.status_code == 201, r.text
    oa.create_ready_database("acme")
    oa.ingest_text("a", "Card transactions settle in the merchant account within two working days.")
    oa.drain()
    delivered = sample(oa.scrape(), "ctxstore_webhook_deliveries_total", outcome="delivered")
    assert delivered >= 1 and len(hook.bodies) == delivered
    hook.status = 503  # retryable: the attempt fails and the delivery is retried
    oa.ingest_text("b", "Refunds are issued to the original card within five days.")
    oa.drain()
    m = oa.scrape()
    assert sample(m, "ctxstore_webhook_deliveries_total", outcome="retrying") >= 1
    hook.status = 410  # not retryable
    oa.ingest_text("c", "Chargebacks are disputed within thirty days.")
    oa.drain()
    assert sample(oa.scrape(), "ctxstore_webhook_deliveries_total", outcome="permanently_failed") >= 1


def test_admission_refusals_are_counted_by_class(tmp_path: Path) -> None:
    oa = observed_app(tmp_path / "data", max_inflight_other=1, admission_wait_s=0.01)
    try:
        [admission] = [m.kwargs["admission"] for m in oa.app.user_middleware if m.cls is ConventionsMiddleware]

        async def refused_while_the_slot_is_held() -> int:
            gate = admission.gate("other")
            await gate.enter()  # this loop's only "other" slot: the request below waits 25 ms, then is refused
            try:
                transport = httpx.ASGITransport(app=oa.app, client=("127.0.0.1", 1))
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                    r = await c.get("/databases", headers=oa.headers())
                    assert r.headers["Retry-After"]
                    return r.status_code
            finally:
                gate.leave()

        assert asyncio.run(refused_while_the_slot_is_held()) == 503
        m = oa.scrape()
        assert sample(m, "ctxstore_admission_refusals_total", klass="other") == 1
        assert sample(m, REQUESTS, route="/databases", method="GET", status="503") == 1  # refused before routing
    finally:
        oa.close()


def test_metrics_answer_loopback_clients_only_by_default(tmp_path: Path) -> None:
    remote = observed_app(tmp_path / "a", client=("203.0.113.7", 40000))
    try:
        r = remote.client.get("/metrics")
        assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN"
        assert remote.client.get("/ready").status_code == 200  # /ready and /health stay open
    finally:
        remote.close()


def test_metrics_token_when_set_is_required_from_everyone(tmp_path: Path) -> None:
    oa = observed_app(tmp_path / "a", metrics_token="m-token-1")
    try:
        assert oa.client.get("/metrics").status_code == 403  # even from loopback
        assert oa.client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
        assert oa.client.get("/metrics", headers={"Authorization": f"Bearer {oa.key}"}).status_code == 403
        assert oa.scrape(Authorization="Bearer m-token-1")
    finally:
        oa.close()
