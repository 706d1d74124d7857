"""/webhooks/indexing*: registration, signing, durable delivery with retries, SSRF refusals, records.

Deliveries go to a real HTTP receiver on 127.0.0.1 (a threaded http.server), so the apps that
deliver run with allow_private_webhooks; the SSRF tests use an app without it. Events are emitted
by calling the service directly, as ingestion does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from standardwebhooks import Webhook, WebhookVerificationError

from ctxstore.config import Settings
from ctxstore.http.app import create_app
from ctxstore.pipeline.jobs import queue_specs
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.runtime import build_container
from ctxstore.services.registry import build_services
from ctxstore.services.webhooks.events import INDEXING_STATUS_CHANGED
from ctxstore.services.webhooks.rules import WEBHOOK_QUEUE
from ctxstore.services.webhooks.service import WebhookService
from tests.support.app import LocalApp, make_app

FAST_RETRIES: dict[str, Any] = {
    "allow_private_webhooks": True,
    "webhook_retry_interval_s": 0.02,
    "webhook_retry_max_delay_s": 0.1,
    "webhook_max_attempts": 3,
    "webhook_timeout_s": 3.0,
}


# ---- a real receiver -----------------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    server: ThreadingHTTPServer
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answered in order; then `default`
    default: int = 200
    extra_headers: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else self.default

    def count(self) -> int:
        with self.lock:
            return len(self.requests)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            rec = holder["r"]
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            with rec.lock:
                rec.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status = rec.next_status()
            self.send_response(status)
            for k, v in rec.extra_headers.items():
                self.send_header(k, v)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["r"] = rec = Receiver(server)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield rec
    server.shutdown()
    server.server_close()


# ---- apps ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    """One delivering app for the module; each test uses its own API key, hence its own webhook."""
    la = make_app(tmp_path_factory.mktemp("wh") / "data", **FAST_RETRIES)
    yield la
    la.close()


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    """Without allow_private_webhooks: loopback and private targets are refused."""
    la = make_app(tmp_path_factory.mktemp("strict") / "data")
    yield la
    la.close()


@pytest.fixture
def key(app: LocalApp) -> Iterator[str]:
    k = app.services.keys.create("default")
    yield k
    # Unregister, so later tests' events do not queue deliveries to this test's (stopped) receiver.
    app.client.delete("/webhooks/indexing", headers=app.headers(k))


def reopen(data_dir: Path, key: str, **settings: Any) -> LocalApp:
    """The app again on an existing data dir (a restart): same organisation, same key."""
    container = build_container(Settings(data_dir=data_dir, **settings))
    services = build_services(container)
    app = create_app(services)
    runner = LocalRunner(container.queue, queue_specs(services))
    return LocalApp(container, services, app, TestClient(app, raise_server_exceptions=False), key, runner, data_dir)


def webhooks(la: LocalApp) -> WebhookService:
    assert la.services.webhooks is not None
    return la.services.webhooks


def emit(la: LocalApp, doc_id: str, status: str = "completed", org: str = "default", **extra: Any) -> None:
    payload: dict[str, Any] = {
        "id": doc_id,
        "doc_id": doc_id,
        "database": "db1",
        "collection": "",
        "type": "knowledge",
        "indexing_status": status,
        "previous_status": "graph_creation",
        **extra,
    }
    webhooks(la).emit(org, INDEXING_STATUS_CHANGED, payload)


def pump(la: LocalApp, cond: Callable[[], bool], timeout: float = 10.0) -> None:
    """Run background jobs until `cond` holds (retries are scheduled a little in the future)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        la.runner.run_once()
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached in time")


def answer(r: Any) -> dict[str, Any]:
    """The webhook object of a success: the reference's envelope `data`, its fields also at the top level."""
    body = r.json()
    assert body["success"] is True and body["error"] is None and body["meta"]["request_id"], body
    data: dict[str, Any] = body["data"]
    assert {k: body[k] for k in data} == data  # the spec's own object, read at the top level
    return data


def register(la: LocalApp, key: str, url: str, **body: Any) -> dict[str, Any]:
    r = la.client.post("/webhooks/indexing", json={"url": url, **body}, headers=la.headers(key))
    assert r.status_code == 201, r.text
    return answer(r)


def deliveries(la: LocalApp, key: str, **params: Any) -> dict[str, Any]:
    r = la.client.get("/webhooks/indexing/deliveries", params=params, headers=la.headers(key))
    assert r.status_code == 200, r.text
    return answer(r)


def only_delivery(la: LocalApp, key: str) -> dict[str, Any]:
    items = deliveries(la, key)["deliveries"]
    assert len(items) == 1, items
    item: dict[str, Any] = items[0]
    return item


def assert_hydradb_signature(req: Received, secret: str) -> None:
    """What the official client's helper checks: `sha256=` + hex HMAC-SHA256 of the raw body, keyed by the secret
    string as the caller holds it; a wrong secret or a changed body does not match."""
    got = {k.lower(): v for k, v in req.headers.items()}["x-hydradb-signature"]
    assert got.startswith("sha256=")

    def expected(key: str, body: bytes) -> str:
        return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()

    assert hmac.compare_digest(got, expected(secret, req.body))
    assert got != expected(secret + "x", req.body) and got != expected(secret, req.body + b" ")


def assert_failure(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["success"] is False and body["error"]["code"] == code, body
    assert body["error"]["message"]


# ---- registration --------------------------------------------------------------------------


def test_register_get_delete_in_both_shapes(app: LocalApp, key: str, receiver: Receiver) -> None:
    h = app.headers(key)
    r = app.client.get("/webhooks/indexing", headers=h)
    assert r.status_code == 200
    assert answer(r) == {"registered": False, "url": "", "event_types": [], "signing_secret_configured": False}

    out = register(app, key, receiver.url)
    assert out["registered"] is True and out["url"] == receiver.url
    assert out["event_types"] == [INDEXING_STATUS_CHANGED]
    assert out["signing_secret_configured"] is False and "signing_secret" not in out

    r = app.client.get("/webhooks/indexing", headers=h)
    assert answer(r) == {
        "registered": True,
        "url": receiver.url,
        "event_types": [INDEXING_STATUS_CHANGED],
        "signing_secret_configured": False,
    }
    # Re-registering updates in place.
    out = register(app, key, receiver.url + "2", event_types=[INDEXING_STATUS_CHANGED])
    assert out["url"] == receiver.url + "2"

    r = app.client.delete("/webhooks/indexing", headers=h)
    assert r.status_code == 200 and answer(r) == {"deleted": True, "message": "Success"}
    assert_failure(app.client.delete("/webhooks/indexing", headers=h), 404, "NOT_FOUND")
    assert app.client.get("/webhooks/indexing", headers=h).json()["registered"] is False


def test_registration_validation(app: LocalApp, key: str, receiver: Receiver) -> None:
    h = app.headers(key)
    post = app.client.post
    assert_failure(post("/webhooks/indexing", json={}, headers=h), 400, "INVALID_PARAMETERS")
    assert_failure(
        post("/webhooks/indexing", json={"url": "ftp://example.com/x"}, headers=h), 400, "INVALID_PARAMETERS"
    )
    assert_failure(post("/webhooks/indexing", json={"url": "not a url"}, headers=h), 400, "INVALID_PARAMETERS")
    assert_failure(
        post("/webhooks/indexing", json={"url": receiver.url, "event_types": ["memory.created"]}, headers=h),
        400,
        "INVALID_PARAMETERS",
    )
    assert_failure(
        post("/webhooks/indexing", json={"url": receiver.url, "event_types": []}, headers=h), 400, "INVALID_PARAMETERS"
    )
    both = {"url": receiver.url, "signing_secret": "whsec_" + "A" * 40, "generate_signing_secret": True}
    assert_failure(post("/webhooks/indexing", json=both, headers=h), 400, "INVALID_PARAMETERS")
    short = {"url": receiver.url, "signing_secret": "short"}
    assert_failure(post("/webhooks/indexing", json=short, headers=h), 422, "VALIDATION_ERROR")
    assert_failure(
        post("/webhooks/indexing", json={"url": "http://no-such-host.invalid/x"}, headers=h), 400, "INVALID_PARAMETERS"
    )
    # Nothing was registered by any of these, and every route needs a key.
    assert app.client.get("/webhooks/indexing", headers=h).json()["registered"] is False
    assert_failure(app.client.get("/webhooks/indexing"), 401, "UNAUTHORIZED")
    assert_failure(app.client.post("/webhooks/indexing/test", headers={"API-Version": "2"}), 401, "UNAUTHORIZED")
    # Routes that need a registration.
    for method, path in [
        ("POST", "/webhooks/indexing/signing-secret"),
        ("DELETE", "/webhooks/indexing/signing-secret"),
        ("POST", "/webhooks/indexing/test"),
    ]:
        assert_failure(app.client.request(method, path, headers=h), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/hook",
        "http://localhost:{port}/hook",  # a name that resolves to loopback
        "http://[::1]:{port}/hook",
        "http://10.1.2.3/hook",
        "http://172.16.0.5/hook",
        "http://192.168.1.10/hook",
        "http://169.254.10.10/hook",  # link-local
        "http://169.254.169.254/latest/meta-data/",  # metadata
        "http://[fd00:ec2::254]/latest/meta-data/",  # metadata (IPv6)
        "http://100.64.0.1/hook",  # CGNAT
        "http://0.0.0.0:{port}/hook",
        "http://224.0.0.1/hook",
        "http://[::ffff:127.0.0.1]:{port}/hook",  # IPv4-mapped loopback
        "http://2130706433:{port}/hook",  # 127.0.0.1 as one integer
    ],
)
def test_private_targets_refused_without_the_flag(strict: LocalApp, receiver: Receiver, url: str) -> None:
    port = receiver.server.server_address[1]
    r = strict.client.post("/webhooks/indexing", json={"url": url.format(port=port)}, headers=strict.headers())
    assert_failure(r, 400, "INVALID_PARAMETERS")
    assert "refused" in r.json()["error"]["message"]
    assert strict.client.get("/webhooks/indexing", headers=strict.headers()).json()["registered"] is False


def test_metadata_refused_even_with_the_flag(app: LocalApp, key: str) -> None:
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/"):
        r = app.client.post("/webhooks/indexing", json={"url": url}, headers=app.headers(key))
        assert_failure(r, 400, "INVALID_PARAMETERS")


# ---- signing and delivery ------------------------------------------------------------------


def test_emit_delivers_a_signed_standard_webhooks_event(app: LocalApp, key: str, receiver: Receiver) -> None:
    out = register(app, key, receiver.url, generate_signing_secret=True)
    secret = out["signing_secret"]
    assert secret.startswith("whsec_") and out["signing_secret_configured"] is True
    # Returned once: later reads only say it is configured.
    got = app.client.get("/webhooks/indexing", headers=app.headers(key)).json()
    assert "signing_secret" not in got and got["signing_secret_configured"] is True

    emit(app, "doc-1", "errored", error_code="E6001", error_message="vector store down", extra_key=1)
    # emit only queued it: nothing went out yet, the record is pending.
    assert receiver.count() == 0
    assert only_delivery(app, key)["status"] == "pending"

    pump(app, lambda: receiver.count() == 1)
    req = receiver.requests[0]
    assert req.path == "/hook"
    event = Webhook(secret).verify(req.body, req.headers)
    assert event["type"] == INDEXING_STATUS_CHANGED and event["timestamp"].endswith("Z")
    data = event["data"]
    assert data["id"] == data["doc_id"] == "doc-1"
    assert data["database"] == "db1" and data["collection"] == "" and data["type"] == "knowledge"
    assert data["indexing_status"] == "errored" and data["previous_status"] == "graph_creation"
    assert data["error_code"] == "E6001" and data["error_message"] == "vector store down"
    assert data["extra_key"] == 1 and data["timestamp"]
    assert req.headers["webhook-signature"].startswith("v1,")
    assert req.headers["content-type"] == "application/json"
    assert_hydradb_signature(req, secret)
    # A wrong secret does not verify.
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "QUJD" * 8).verify(req.body, req.headers)

    pump(app, lambda: only_delivery(app, key)["status"] == "completed")
    d = only_delivery(app, key)
    assert req.headers["webhook-id"] == d["delivery_id"] and d["delivery_id"].startswith("dlv_")
    assert d["attempts"] == 1 and d["error_code"] == "" and d["error_message"] == ""
    assert d["doc_id"] == "doc-1" and d["indexing_status"] == "errored"
    assert d["event_type"] == INDEXING_STATUS_CHANGED and d["webhook_url"] == receiver.url
    assert d["created_at"].endswith("Z") and d["updated_at"] >= d["created_at"]
    r = app.client.get(f"/webhooks/indexing/deliveries/{d['delivery_id']}", headers=app.headers(key))
    assert r.status_code == 200 and answer(r) == d


def test_signing_secret_routes(app: LocalApp, key: str, receiver: Receiver) -> None:
    h = app.headers(key)
    register(app, key, receiver.url)
    # Supply one's own secret.
    mine = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0ISE="
    r = app.client.post("/webhooks/indexing/signing-secret", json={"signing_secret": mine}, headers=h)
    assert r.status_code == 200 and answer(r) == {"generated": False, "signing_secret": mine, "message": "Success"}
    r = app.client.post("/webhooks/indexing/test", headers=h)
    assert r.status_code == 200 and answer(r) == {"delivered": True, "status_code": 200, "message": "Success"}
    event = Webhook(mine).verify(receiver.requests[-1].body, receiver.requests[-1].headers)
    assert event["type"] == "webhook.test"
    assert_hydradb_signature(receiver.requests[-1], mine)
    # Re-registering without a secret keeps it.
    assert register(app, key, receiver.url)["signing_secret_configured"] is True
    # Too short: 422.
    r = app.client.post("/webhooks/indexing/signing-secret", json={"signing_secret": "tooshort"}, headers=h)
    assert_failure(r, 422, "VALIDATION_ERROR")
    # No body: one is generated.
    r = app.client.post("/webhooks/indexing/signing-secret", headers=h)
    gen = r.json()
    assert r.status_code == 200 and gen["generated"] is True and gen["signing_secret"].startswith("whsec_")
    app.client.post("/webhooks/indexing/test", headers=h)
    Webhook(gen["signing_secret"]).verify(receiver.requests[-1].body, receiver.requests[-1].headers)
    # Disable signing: deliveries carry no signature (still id and timestamp).
    r = app.client.delete("/webhooks/indexing/signing-secret", headers=h)
    assert r.status_code == 200 and r.json()["signing_secret_configured"] is False and r.json()["registered"] is True
    app.client.post("/webhooks/indexing/test", headers=h)
    last = receiver.requests[-1].headers
    assert "webhook-signature" not in last and last["webhook-id"] and last["webhook-timestamp"]
    assert "x-hydradb-signature" not in {k.lower() for k in last}


def test_test_route_reports_the_endpoint_status(app: LocalApp, key: str, receiver: Receiver) -> None:
    register(app, key, receiver.url)
    receiver.statuses = [500]
    r = app.client.post("/webhooks/indexing/test", headers=app.headers(key))
    assert r.status_code == 200
    body = r.json()
    assert body["delivered"] is False and body["status_code"] == 500 and "500" in body["message"]
    # The test is synchronous, and kept in the delivery history like any delivery (the console lists it there).
    [kept] = deliveries(app, key)["deliveries"]
    assert kept["event_type"] == "webhook.test" and kept["attempts"] == 1
    assert kept["status"] == "permanently_failed" and kept["error_code"] == "HTTP_500"
    # An endpoint that is down.
    register(app, key, "http://127.0.0.1:1/nothing-listens")
    body = app.client.post("/webhooks/indexing/test", headers=app.headers(key)).json()
    assert body["delivered"] is False and body["status_code"] == 0


def test_retries_with_backoff_until_delivered(app: LocalApp, key: str, receiver: Receiver) -> None:
    register(app, key, receiver.url, generate_signing_secret=True)
    receiver.statuses = [503, 429]  # then 200
    emit(app, "doc-retry")
    pump(app, lambda: receiver.count() >= 1)
    first = only_delivery(app, key)
    assert first["status"] in ("failed", "pending", "completed")
    pump(app, lambda: only_delivery(app, key)["status"] == "completed")
    d = only_delivery(app, key)
    assert d["attempts"] == 3 and receiver.count() == 3
    # Every attempt is the same message: same id and body (receivers deduplicate on webhook-id).
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1
    assert len({r.body for r in receiver.requests}) == 1


def test_failed_attempt_is_recorded_before_the_next(app: LocalApp, key: str, receiver: Receiver) -> None:
    register(app, key, receiver.url)
    receiver.statuses = [502]
    emit(app, "doc-502")
    # One attempt only: drive the handler directly, no retry yet.
    ran = 0
    while ran == 0:
        ran = app.runner.run_once()
    d = only_delivery(app, key)
    if d["status"] == "failed":  # the retry may already have run if the jittered delay was ~0
        assert d["attempts"] == 1 and d["error_code"] == "HTTP_502" and "502" in d["error_message"]
    pump(app, lambda: only_delivery(app, key)["status"] == "completed")


def test_permanently_failed_then_manual_retry(app: LocalApp, key: str, receiver: Receiver) -> None:
    h = app.headers(key)
    register(app, key, receiver.url)
    receiver.default = 500
    emit(app, "doc-dead")
    pump(app, lambda: only_delivery(app, key)["status"] == "permanently_failed")
    d = only_delivery(app, key)
    assert d["attempts"] == 3 == receiver.count()  # webhook_max_attempts
    assert d["error_code"] == "HTTP_500"

    receiver.default = 200
    r = app.client.post(f"/webhooks/indexing/deliveries/{d['delivery_id']}/retry", headers=h)
    assert r.status_code == 200
    assert answer(r) == {"delivery_id": d["delivery_id"], "queued": True, "message": "Success"}
    pump(app, lambda: only_delivery(app, key)["status"] == "completed")
    d2 = only_delivery(app, key)
    assert d2["attempts"] == 4 and d2["error_code"] == "" and receiver.count() == 4
    assert receiver.requests[-1].headers["webhook-id"] == d["delivery_id"]
    # Only failed deliveries can be retried; unknown ones are 404.
    assert_failure(
        app.client.post(f"/webhooks/indexing/deliveries/{d['delivery_id']}/retry", headers=h), 409, "CONFLICT"
    )
    assert_failure(app.client.post("/webhooks/indexing/deliveries/dlv_nope/retry", headers=h), 404, "NOT_FOUND")


def test_client_errors_and_redirects_are_not_retried(app: LocalApp, key: str, receiver: Receiver) -> None:
    register(app, key, receiver.url)
    receiver.statuses = [400]
    emit(app, "doc-400")
    pump(app, lambda: only_delivery(app, key)["status"] == "permanently_failed")
    d = only_delivery(app, key)
    assert d["attempts"] == 1 and d["error_code"] == "HTTP_400"

    # A redirect is not followed, even to an allowed place.
    register(app, key, receiver.url)
    receiver.statuses = [302]
    receiver.extra_headers = {"location": receiver.url.replace("/hook", "/elsewhere")}
    before = receiver.count()
    emit(app, "doc-302")
    pump(app, lambda: deliveries(app, key, status="permanently_failed")["count"] == 2)
    assert receiver.count() == before + 1 and all(r.path == "/hook" for r in receiver.requests)
    latest = deliveries(app, key)["deliveries"][0]
    assert latest["doc_id"] == "doc-302" and latest["error_code"] == "HTTP_302"
    assert "redirect" in latest["error_message"]


def test_delivery_list_paging_filters_and_scoping(app: LocalApp, key: str, receiver: Receiver) -> None:
    h = app.headers(key)
    register(app, key, receiver.url)
    for i in range(5):
        emit(app, f"doc-{i}")
        time.sleep(0.002)  # distinct creation milliseconds: a stable newest-first order
    pump(app, lambda: deliveries(app, key, status="completed")["count"] == 5)

    page = deliveries(app, key, limit=2)
    assert page["count"] == 2 and page["next_cursor"]
    assert [d["doc_id"] for d in page["deliveries"]] == ["doc-4", "doc-3"]
    seen = [d["doc_id"] for d in page["deliveries"]]
    while page["next_cursor"]:
        page = deliveries(app, key, limit=2, cursor=page["next_cursor"])
        seen += [d["doc_id"] for d in page["deliveries"]]
    assert seen == ["doc-4", "doc-3", "doc-2", "doc-1", "doc-0"]
    assert deliveries(app, key, status="failed") == {"deliveries": [], "count": 0, "next_cursor": None}
    assert deliveries(app, key, status="completed", limit=5)["next_cursor"] is None

    for params in ({"status": "bogus"}, {"limit": 0}, {"limit": 101}, {"limit": "x"}, {"cursor": "%%%"}):
        r = app.client.get("/webhooks/indexing/deliveries", params=params, headers=h)
        assert_failure(r, 400, "INVALID_PARAMETERS")
    assert_failure(app.client.get("/webhooks/indexing/deliveries/dlv_missing", headers=h), 404, "NOT_FOUND")

    # Another key of the same organisation has its own webhook (none) and sees none of these.
    other = app.services.keys.create("default")
    assert app.client.get("/webhooks/indexing", headers=app.headers(other)).json()["registered"] is False
    assert deliveries(app, other)["count"] == 0
    one = deliveries(app, key, limit=1)["deliveries"][0]["delivery_id"]
    r = app.client.get(f"/webhooks/indexing/deliveries/{one}", headers=app.headers(other))
    assert_failure(r, 404, "NOT_FOUND")
    # Another organisation's events never reach this webhook.
    before = receiver.count()
    emit(app, "foreign", org="someone-else")
    app.drain()
    assert receiver.count() == before and deliveries(app, key)["count"] == 5


def test_emit_without_subscribers_queues_nothing(app: LocalApp, key: str, receiver: Receiver) -> None:
    app.drain()
    pending = app.container.queue.pending(WEBHOOK_QUEUE)
    emit(app, "nobody-listens", org="org-without-webhooks")
    assert app.container.queue.pending(WEBHOOK_QUEUE) == pending
    register(app, key, receiver.url)
    webhooks(app).emit("default", "some.other_event", {"id": "x"})  # not subscribed
    assert app.container.queue.pending(WEBHOOK_QUEUE) == pending
    assert deliveries(app, key)["count"] == 0


# ---- restarts ------------------------------------------------------------------------------


def test_queued_delivery_survives_restart(tmp_path: Path, receiver: Receiver) -> None:
    data = tmp_path / "data"
    first = make_app(data, **FAST_RETRIES)
    key = first.key
    out = register(first, key, receiver.url, generate_signing_secret=True)
    emit(first, "doc-restart")
    first.close()  # nothing delivered before the "crash"
    assert receiver.count() == 0

    second = reopen(data, key, **FAST_RETRIES)
    try:
        pump(second, lambda: receiver.count() == 1)
        Webhook(out["signing_secret"]).verify(receiver.requests[0].body, receiver.requests[0].headers)
        assert receiver.requests[0].json()["data"]["doc_id"] == "doc-restart"
        pump(second, lambda: only_delivery(second, key)["status"] == "completed")
    finally:
        second.close()


def test_delivery_time_recheck_refuses_a_target_that_became_private(tmp_path: Path, receiver: Receiver) -> None:
    """Registered while private targets were allowed; the server now runs without the flag."""
    data = tmp_path / "data"
    first = make_app(data, **FAST_RETRIES)
    key = first.key
    register(first, key, receiver.url)
    emit(first, "doc-recheck")
    first.close()

    second = reopen(data, key)  # no allow_private_webhooks
    try:
        pump(second, lambda: only_delivery(second, key)["status"] == "permanently_failed")
        d = only_delivery(second, key)
        assert d["error_code"] == "URL_REFUSED" and "loopback" in d["error_message"]
        assert receiver.count() == 0
        body = second.client.post("/webhooks/indexing/test", headers=second.headers(key)).json()
        assert body["delivered"] is False and "refused" in body["message"] and receiver.count() == 0
    finally:
        second.close()
