"""What the webhook routes render (the `data` of /webhooks/indexing and its deliveries), exactly their JSON
keys."""

from __future__ import annotations

from typing import TypedDict


class WebhookState(TypedDict):
    """GET /webhooks/indexing: this key's webhook (an unregistered one is all empty)."""

    registered: bool
    url: str
    event_types: list[str]
    signing_secret_configured: bool


class _WebhookChanged(WebhookState):
    message: str


# total=False rather than NotRequired: with postponed annotations only this is seen at run time too.
class WebhookView(_WebhookChanged, total=False):
    """A registration or a secret change: the webhook, and the signing secret only when one was just set."""

    signing_secret: str


class WebhookDeleted(TypedDict):
    deleted: bool
    message: str


class SecretSet(TypedDict):
    """PUT /webhooks/indexing/secret: the secret in force (generated when none was given)."""

    generated: bool
    signing_secret: str
    message: str


class DeliveryView(TypedDict):
    """One delivery record as the API shows it (ISO times; the body and secret are not shown)."""

    delivery_id: str
    doc_id: str
    indexing_status: str
    event_type: str
    status: str
    attempts: int
    error_code: str
    error_message: str
    created_at: str
    updated_at: str
    webhook_url: str


class DeliveryPage(TypedDict):
    deliveries: list[DeliveryView]
    count: int
    next_cursor: str | None


class RetryQueued(TypedDict):
    delivery_id: str
    queued: bool
    message: str


class WebhookTestResult(TypedDict):
    """POST /webhooks/indexing/test: what the endpoint answered the signed `webhook.test` event."""

    delivered: bool
    status_code: int
    message: str
