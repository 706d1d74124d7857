"""`ctxstore serve --log-format json` seen from outside (issue 27, part 5), one real server for the module:

JSON log lines with request id, route, status, latency and organisation, never a key; /ready once the graph
engine and the vector scopes are loaded; /metrics with connector sync outcomes and rate-limit waits (the fake
Slack API answers 429 twice) and webhook deliveries; spans exported to an OTLP collector set by the standard
variable.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.slack_api import FakeSlack
from tests.ops.observed import Receiver, receiver
from tests.support.app import make_app
from tests.support.connectors import DB, connector_env, wait_cycles, wait_for
from tests.support.server import ServerProcess

DAY = 86400.0


@dataclass
class Served:
    srv: ServerProcess
    c: httpx.Client
    key: str
    slack: FakeSlack
    hook: Receiver
    collector: Receiver


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("observed") / "data"
    # The data dir holds a database with one indexed item before the server starts: its vectors are warmed.
    seed = make_app(data)
    key = seed.key
    seed.create_ready_database(DB)
    r = seed.client.post(
        "/context/ingest",
        headers=seed.headers(),
        data={
            "database": DB,
            "app_knowledge": json.dumps(
                [{"id": "seed", "title": "Seed", "type": "note", "content": {"text": "Seeds grow in spring."}}]
            ),
        },
    )
    assert r.status_code == 202
    seed.drain()
    seed.close()
    hooks, collectors = receiver(), receiver()
    hook, collector = next(hooks), next(collectors)
    with FakeSlack() as slack:
        env = connector_env(
            slack,
            CTXSTORE_ALLOW_PRIVATE_WEBHOOKS="true",
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.base_url,
            OTEL_BSP_SCHEDULE_DELAY="100",  # ms between span exports
        )
        with ServerProcess(data, "--log-format", "json", env=env) as srv:
            srv.wait_ready(timeout=120)
            with srv.client(key) as c:
                yield Served(srv, c, key, slack, hook, collector)
            assert srv.stop() == 0  # SIGTERM: a clean exit with the span exporter flushed and the sink removed
    for gen in (hooks, collectors):
        next(gen, None)


def _metrics(s: Served) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(s.srv.base_url + "/metrics", timeout=10)
    assert r.status_code == 200
    return {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for f in text_string_to_metric_families(r.text)
        for x in f.samples
    }


def test_ready_after_the_graph_engine_and_vectors_are_loaded(served: Served) -> None:
    def ready() -> dict | None:  # type: ignore[type-arg]
        r = httpx.get(served.srv.base_url + "/ready", timeout=5)
        return r.json() if r.status_code == 200 else None

    body = wait_for(ready, timeout=60, what="/ready")
    assert body["status"] == "ready"
    assert set(body["parts"]) == {"graph", "vectors", "embedder"}
    assert all(p["state"] == "ready" and p["seconds"] >= 0 for p in body["parts"].values())
    assert any('"ctxstore.ready"' in line and "vectors ready after" in line for line in served.srv.lines)


def test_connector_sync_outcomes_rate_limit_waits_and_webhook_deliveries(served: Served) -> None:
    s, c = served.slack, served.c
    assert c.post("/webhooks/indexing", json={"url": served.hook.url}).status_code == 201
    token = s.add_token("xoxb-observed-secret")
    s.add_channel("COB", "observed")
    s.post("COB", "Metrics are scraped every fifteen seconds", at=time.time() - DAY)
    r = c.post(
        "/connectors",
        json={
            "provider": "slack",
            "database": DB,
            "provider_account_scope": "TOB",
            "credentials": {"access_token": token},
        },
    )
    assert r.status_code == 201, r.text
    cid = r.json()["data"]["connector_id"]
    s.fail("conversations.history", status=429, retry_after=1, times=2)
    r = c.post(f"/connectors/{cid}/configure", json={"resources": [{"resource_id": "COB"}]})
    assert r.status_code == 200, r.text
    wait_cycles(c, cid, 1)
    m = _metrics(served)
    assert m[("ctxstore_connector_rate_limit_waits_total", (("provider", "slack"),))] == 2
    assert m[("ctxstore_connector_rate_limit_wait_seconds_total", (("provider", "slack"),))] == 2.0
    assert m[("ctxstore_connector_syncs_total", (("outcome", "done"), ("provider", "slack")))] >= 1
    wait_for(
        lambda: _metrics(served).get(("ctxstore_webhook_deliveries_total", (("outcome", "delivered"),)), 0) >= 1,
        what="a webhook delivered",
    )
    assert token not in "\n".join(served.srv.lines)


def test_json_log_lines_carry_request_fields_and_never_a_key(served: Served) -> None:
    c, key = served.c, served.key
    r = c.post("/query", json={"database": DB, "query": "when do seeds grow"})
    assert r.status_code == 200
    request_id = r.headers["X-Request-ID"]
    # A wrong key, and a key where no client should put it (the query string), are not logged either.
    wrong = httpx.get(served.srv.base_url + "/databases", headers={"Authorization": f"Bearer {key}x"}, timeout=10)
    assert wrong.status_code == 401
    assert c.get("/databases", params={"api_key": key}).status_code == 200

    def line_of(rid: str) -> dict | None:  # type: ignore[type-arg]
        for line in served.srv.lines:
            if rid in line:
                return json.loads(line)  # type: ignore[no-any-return]
        return None

    line = wait_for(lambda: line_of(request_id), timeout=10, what="the access line")
    assert line["logger"] == "ctxstore.access" and line["level"] == "info"
    assert line["route"] == "/query" and line["method"] == "POST" and line["status"] == 200
    assert line["org_id"] == "default" and line["latency_ms"] > 0 and line["time"].endswith("Z")
    refused = wait_for(lambda: line_of(wrong.headers["X-Request-ID"]), timeout=10, what="the 401 line")
    assert refused["status"] == 401 and refused["route"] == "/databases" and "org_id" not in refused
    lines = list(served.srv.lines)
    assert lines and all(isinstance(json.loads(text), dict) for text in lines)  # every line is one JSON object
    for secret in (key, key.split("_")[-1]):
        assert not [text for text in lines if secret in text], "a key reached the log"


def test_spans_are_exported_to_the_otlp_collector(served: Served) -> None:
    assert served.c.post("/query", json={"database": DB, "query": "seeds"}).status_code == 200

    def names() -> set[str]:
        seen: set[str] = set()
        for path, body in zip([p for p, _ in served.collector.posts], served.collector.bodies, strict=True):
            if path == "/v1/traces":
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                seen |= {sp.name for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans}
        return seen

    got = wait_for(
        lambda: {"POST /query", "query.keyword_lanes", "query.vector_lanes"} <= names() and names(),
        timeout=30,
        what="spans",
    )
    assert "GET /ready" in got or "GET /health" in got
    assert all(ct == "application/x-protobuf" for p, ct in served.collector.posts if p == "/v1/traces")
