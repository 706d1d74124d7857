"""Webhook rules without HTTP: address vetting, URL parsing, secrets, signing, retry schedule, DNS rebinding."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
from ctxstore.adapters.local.sqlite_records import SqliteRecordStore
from ctxstore.adapters.system.system_clock import SystemClock
from ctxstore.config import WebhookSettings
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.network_policy import address_refusal
from ctxstore.pipeline.jobs import webhook_retry
from ctxstore.ports.http_sender import HttpSender
from ctxstore.services.access.principal import Principal
from ctxstore.services.container import Container
from ctxstore.services.registry import Services
from ctxstore.services.webhooks.events import INDEXING_STATUS_CHANGED
from ctxstore.services.webhooks.rules import (
    WEBHOOK_QUEUE,
    TargetRefused,
    check_secret,
    generate_secret,
    parse_url,
    signed_headers,
)
from ctxstore.services.webhooks.service import WebhookService


@pytest.mark.parametrize(
    "ip",
    [
        "127.0.0.1",
        "127.9.9.9",
        "::1",
        "10.0.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "169.254.1.1",
        "fe80::1",
        "fe80::1%eth0",
        "100.64.0.1",
        "100.127.255.254",
        "0.0.0.0",
        "::",
        "224.0.0.251",
        "ff02::1",
        "fc00::1",
        "::ffff:10.0.0.1",
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "192.0.2.1",  # documentation range: not public either
        "240.0.0.1",
    ],
)
def test_non_public_addresses_are_refused_unless_allowed(ip: str) -> None:
    assert address_refusal(ip, allow_private=False) is not None
    assert address_refusal(ip, allow_private=True) is None


@pytest.mark.parametrize("ip", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "100.100.100.200"])
def test_metadata_addresses_are_always_refused(ip: str) -> None:
    assert "metadata" in (address_refusal(ip, allow_private=True) or "")


@pytest.mark.parametrize("ip", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_pass(ip: str) -> None:
    assert address_refusal(ip, allow_private=False) is None


def test_parse_url() -> None:
    assert parse_url("https://example.com/x") == ("https", "example.com", 443)
    assert parse_url("http://Example.COM:8080/x?y=1") == ("http", "example.com", 8080)
    assert parse_url("http://[2001:db8::1]/x") == ("http", "2001:db8::1", 80)
    for bad in (
        "",
        "ftp://example.com/",
        "file:///etc/passwd",
        "http:///nohost",
        "http://a b/",
        "http://x:99999/",
        "javascript:alert(1)",
        "http://example.com/\n",
        "x" * 3000,
    ):
        with pytest.raises(TargetRefused):
            parse_url(bad)


def test_secrets() -> None:
    s = generate_secret()
    assert s.startswith("whsec_") and len(Webhook(s)._whsecret) == 32
    check_secret(s)
    for bad in ("short", "x" * 300):
        with pytest.raises(ApiError) as err:
            check_secret(bad)
        assert err.value.code is ErrorCode.VALIDATION_ERROR


def test_signed_headers_verify_and_unsigned_headers() -> None:
    import time

    secret = generate_secret()
    body = '{"type":"indexing.status_changed","timestamp":"t","data":{}}'
    h = signed_headers(secret, "dlv_1", body, time.time())
    assert Webhook(secret).verify(body.encode(), h)["type"] == INDEXING_STATUS_CHANGED
    assert h["webhook-id"] == "dlv_1" and h["webhook-signature"].startswith("v1,")
    assert "webhook-signature" not in signed_headers("", "dlv_1", body, time.time())


def test_retry_schedule_is_exponential_with_full_jitter() -> None:
    policy = webhook_retry(WebhookSettings())
    assert policy.max_attempts == 8 and policy.jitter and policy.backoff_rate == 2.0
    for attempt in range(1, 9):
        cap = min(policy.max_delay_s, policy.interval_s * 2 ** (attempt - 1))
        delays = [policy.delay(attempt) for _ in range(50)]
        assert all(0 <= d <= cap for d in delays)
    tiny = webhook_retry(WebhookSettings(max_attempts=3, retry_interval_s=0.01, retry_max_delay_s=0.02))
    assert tiny.max_attempts == 3 and tiny.delay(5) <= 0.02


# ---- DNS rebinding: the delivery re-checks what the name resolves to now ------------------------


class FlippingSender:
    """Resolves to a public address first, then to loopback; records what was posted."""

    def __init__(self) -> None:
        self.answers = [["93.184.215.14"], ["127.0.0.1"]]
        self.posts: list[tuple[str, str | None]] = []

    def resolve(self, host: str, port: int) -> list[str]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, *, connect_ip: str | None = None
    ) -> tuple[int | None, str | None]:
        self.posts.append((url, connect_ip))
        return 200, None


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    db = SqliteDb(tmp_path / "records.db")
    c = Container(records=SqliteRecordStore(db), blobs=None, queue=SqliteWorkQueue(db), clock=SystemClock())  # type: ignore[arg-type]
    yield c
    db.close()


def _service(c: Container, sender: HttpSender) -> WebhookService:
    return WebhookService(c.records, c.clock, queue=lambda: c.queue, sender=lambda: sender)


def test_dns_rebinding_is_refused_at_delivery(container: Container) -> None:
    sender = FlippingSender()
    svc = _service(container, sender)
    p = Principal(org="o1", key_prefix="abcdefabcdef")
    svc.register(p, "https://hooks.example.com/x", None, None, False)  # vetted: public address
    svc.emit("o1", INDEXING_STATUS_CHANGED, {"id": "d1", "indexing_status": "completed"})
    (job,) = container.queue.claim(WEBHOOK_QUEUE, lease_s=30)
    result = svc.deliver(job)
    assert result is not None and not result.delivered and not result.retry
    assert sender.posts == []
    (d,) = svc.list_deliveries(p, None, None, None)["deliveries"]
    assert d["status"] == "permanently_failed" and d["error_code"] == "URL_REFUSED"


def test_connection_is_pinned_to_the_vetted_address(container: Container) -> None:
    sender = FlippingSender()
    sender.answers = [["93.184.215.14"]]
    svc = _service(container, sender)
    p = Principal(org="o1", key_prefix="abcdefabcdef")
    svc.register(p, "https://hooks.example.com/x", None, None, False)
    svc.emit("o1", INDEXING_STATUS_CHANGED, {"id": "d1", "indexing_status": "completed"})
    (job,) = container.queue.claim(WEBHOOK_QUEUE, lease_s=30)
    result = svc.deliver(job)
    assert result is not None and result.delivered
    assert sender.posts == [("https://hooks.example.com/x", "93.184.215.14")]


def test_registration_without_a_sender_is_unavailable(container: Container) -> None:
    svc = Services(container).webhooks  # the container has no http_sender
    with pytest.raises(ApiError) as err:
        svc.register(Principal(org="o1", key_prefix="k"), "https://example.com/", None, None, False)
    assert err.value.code is ErrorCode.SERVICE_UNAVAILABLE
