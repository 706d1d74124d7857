"""`client.webhooks`: the calling key's indexing webhook, its signing secret and deliveries.

These routes answer the reference's own objects (no envelope); failures are CtxstoreError as everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxstore.client.transport import Transport

BASE = "/webhooks/indexing"


class WebhooksApi:
    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        # The webhook object: the envelope's `data` (a server before issue 25 answered the object bare, which the
        # transport passes through as it is).
        out: dict[str, Any] = self._t.request(method, BASE + path, envelope=True, **kwargs)
        return out

    def register(
        self,
        url: str,
        *,
        event_types: Sequence[str] | None = None,
        signing_secret: str | None = None,
        generate_signing_secret: bool = False,
    ) -> dict[str, Any]:
        """Register (or re-point) this key's webhook. A generated secret is returned once."""
        body: dict[str, Any] = {"url": url, "generate_signing_secret": generate_signing_secret}
        if event_types is not None:
            body["event_types"] = list(event_types)
        if signing_secret is not None:
            body["signing_secret"] = signing_secret
        return self._call("POST", "", json=body)

    def get(self) -> dict[str, Any]:
        return self._call("GET", "")

    def delete(self) -> dict[str, Any]:
        return self._call("DELETE", "")

    def set_signing_secret(self, signing_secret: str | None = None) -> dict[str, Any]:
        """Set a secret, or generate one when None (returned once)."""
        return self._call("POST", "/signing-secret", json={"signing_secret": signing_secret} if signing_secret else {})

    def clear_signing_secret(self) -> dict[str, Any]:
        return self._call("DELETE", "/signing-secret")

    def deliveries(
        self, *, limit: int | None = None, cursor: str | None = None, status: str | None = None
    ) -> dict[str, Any]:
        params = {k: str(v) for k, v in (("limit", limit), ("cursor", cursor), ("status", status)) if v is not None}
        return self._call("GET", "/deliveries", params=params)

    def delivery(self, delivery_id: str) -> dict[str, Any]:
        return self._call("GET", f"/deliveries/{delivery_id}")

    def retry(self, delivery_id: str) -> dict[str, Any]:
        return self._call("POST", f"/deliveries/{delivery_id}/retry")

    def test(self) -> dict[str, Any]:
        """Send a `webhook.test` event to the registered URL now."""
        return self._call("POST", "/test")
