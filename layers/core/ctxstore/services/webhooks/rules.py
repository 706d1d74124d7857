"""The rules of indexing webhooks that need no storage: event types, delivery states, target URL and address
checks, signing secrets and the signed headers of a delivery, and the deliveries list's cursor
(the service that uses them is `service.py`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from standardwebhooks import Webhook

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.ports.records import Put
from ctxstore.services import record_kinds as rk
from ctxstore.services.webhooks.answers import DeliveryView, WebhookState, WebhookView
from ctxstore.services.webhooks.events import INDEXING_STATUS_CHANGED

WEBHOOK_QUEUE = "webhooks"
TEST_EVENT = "webhook.test"
SUPPORTED_EVENT_TYPES: tuple[str, ...] = (INDEXING_STATUS_CHANGED,)
DEFAULT_EVENT_TYPES: list[str] = [INDEXING_STATUS_CHANGED]

PENDING = "pending"
COMPLETED = "completed"
FAILED = "failed"  # the last attempt failed; another one is scheduled
PERMANENTLY_FAILED = "permanently_failed"
DELIVERY_STATUSES = (PENDING, COMPLETED, FAILED, PERMANENTLY_FAILED)

SECRET_PREFIX = "whsec_"
MIN_SECRET_CHARS = 16
MAX_SECRET_CHARS = 256
MAX_URL_CHARS = 2048
DEFAULT_PAGE = 20
MAX_PAGE = 100
DELIVERY_RETENTION_S = 30 * 86400
RETRYABLE_STATUSES = frozenset({408, 429})


class TargetRefused(Exception):
    """The URL may not be delivered to (scheme, host or address); the message says why."""


class TargetUnresolvable(Exception):
    """The host name did not resolve (may be temporary)."""


@dataclass(frozen=True)
class Target:
    url: str
    host: str
    port: int
    connect_ip: str


@dataclass(frozen=True)
class AttemptResult:
    """What one delivery attempt came to; `retry` asks the queue runner for another attempt."""

    delivered: bool
    retry: bool = False
    status_code: int | None = None
    error_code: str = ""
    error_message: str = ""


# ---- address and URL rules (pure) ----------------------------------------------------------


def parse_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an acceptable webhook URL; raises TargetRefused otherwise."""
    if not url or len(url) > MAX_URL_CHARS:
        raise TargetRefused(f"url must be 1 to {MAX_URL_CHARS} characters")
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        raise TargetRefused("url must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"url is malformed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise TargetRefused("url must use http or https")
    host = parts.hostname or ""
    if not host:
        raise TargetRefused("url must name a host")
    return scheme, host, port if port is not None else (443 if scheme == "https" else 80)


# ---- secrets -------------------------------------------------------------------------------


def generate_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def check_secret(secret: str) -> None:
    """A secret supplied by the caller: 16+ characters that the standardwebhooks library accepts."""
    if not (MIN_SECRET_CHARS <= len(secret) <= MAX_SECRET_CHARS):
        raise ApiError(
            ErrorCode.VALIDATION_ERROR,
            f"signing_secret must be {MIN_SECRET_CHARS} to {MAX_SECRET_CHARS} characters",
        )
    try:
        Webhook(secret)
    except Exception as exc:  # binascii.Error, ValueError or the library's own: all mean unusable
        raise ApiError(
            ErrorCode.VALIDATION_ERROR,
            f"signing_secret is not a usable Standard Webhooks secret (use 'whsec_' followed by base64): {exc}",
        ) from None


def hydradb_signature(secret: str, body: str) -> str:
    """The reference's `X-HydraDB-Signature`: `sha256=` and the hex HMAC-SHA256 of the raw (UTF-8) body, keyed by
    the secret string exactly as the caller holds it (the official client's verification helper)."""
    return "sha256=" + hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()


def signed_headers(secret: str, msg_id: str, body: str, now: float) -> dict[str, str]:
    """Standard Webhooks headers and the reference's signature, over the same secret; without a secret both
    signature headers are left out."""
    ts = int(now)
    headers = {
        "content-type": "application/json",
        "user-agent": "ctxstore-webhooks/2",
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
    }
    if secret:
        headers["webhook-signature"] = Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, tz=UTC), body)
        headers["x-hydradb-signature"] = hydradb_signature(secret, body)
    return headers


def _encode_cursor(sk: str) -> str:
    return base64.urlsafe_b64encode(sk.encode()).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        sk = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError):
        raise invalid("cursor is not a cursor this endpoint returned") from None
    if not sk.startswith("dlv_"):
        raise invalid("cursor is not a cursor this endpoint returned")
    return sk


def webhook_state(data: dict[str, Any]) -> WebhookState:
    return {
        "registered": True,
        "url": data["url"],
        "event_types": list(data["event_types"]),
        "signing_secret_configured": bool(data.get("signing_secret")),
    }


def webhook_view(data: dict[str, Any], message: str = "Success", secret: str | None = None) -> WebhookView:
    state = webhook_state(data)
    out: WebhookView = {
        "registered": state["registered"],
        "url": state["url"],
        "event_types": state["event_types"],
        "signing_secret_configured": state["signing_secret_configured"],
        "message": message,
    }
    if secret is not None:
        out["signing_secret"] = secret
    return out


def new_delivery_id(now: float) -> str:
    # Time first (hex milliseconds), so the sort key orders deliveries by creation time.
    return f"dlv_{int(now * 1000):012x}{secrets.token_hex(6)}"


def delivery_job_id(delivery_id: str, gen: int) -> str:
    return f"{delivery_id}.{gen}"


def delivery_put(data: dict[str, Any], *, if_absent: bool = False, if_version: int | None = None) -> Put:
    return Put(
        rk.WEBHOOK_DELIVERY,
        data["key_prefix"],
        data["delivery_id"],
        data,
        if_absent=if_absent,
        if_version=if_version,
        expires_at=float(data["created_at"]) + DELIVERY_RETENTION_S,
    )


def delivery_view(d: dict[str, Any]) -> DeliveryView:
    return {
        "delivery_id": d["delivery_id"],
        "doc_id": d.get("doc_id", ""),
        "indexing_status": d.get("indexing_status", ""),
        "event_type": d.get("event_type", ""),
        "status": d.get("status", ""),
        "attempts": int(d.get("attempts", 0)),
        "error_code": d.get("error_code", ""),
        "error_message": d.get("error_message", ""),
        "created_at": iso(float(d["created_at"])),
        "updated_at": iso(float(d["updated_at"])),
        "webhook_url": d.get("webhook_url", ""),
    }
