"""Which routes the reference OpenAPI answers with a bare object, and the one rule that serves both readers.

The spec puts every core answer in the envelope `{success, data, error, meta}` and gives webhook management
its own object; the reference (what the official client is generated from) answers connectors and the
metadata-schema update bare and wraps webhooks in the envelope. On the routes named here the answer is the
envelope with `data`'s own fields ALSO at the top level, so a reader of either document finds its fields.
The envelope's keys win a clash: the one the reference has (`meta` on configure, holding `deprecation`) is
the envelope's `meta`, which carries `deprecation` in the same shape.
"""

from __future__ import annotations

from typing import Any

# (method, route template as the router declares it)
BARE_IN_REFERENCE: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/connector-catalog"),
        ("POST", "/connector-discovery"),
        ("GET", "/connectors"),
        ("POST", "/connectors"),
        ("GET", "/connectors/providers"),
        ("GET", "/connectors/{connector_id}"),
        ("PATCH", "/connectors/{connector_id}"),
        ("DELETE", "/connectors/{connector_id}"),
        ("GET", "/connectors/{connector_id}/discover"),
        ("POST", "/connectors/{connector_id}/configure"),
        ("POST", "/connectors/{connector_id}/sync"),
        ("GET", "/connectors/{connector_id}/resources"),
        ("POST", "/connectors/{connector_id}/resources"),
        ("DELETE", "/connectors/{connector_id}/resources/{resource_id}"),
        ("PATCH", "/databases/{database}/metadata-schema"),
        # The spec's "own object" for webhook management: the same rule serves it with the reference's envelope.
        ("POST", "/webhooks/indexing"),
        ("GET", "/webhooks/indexing"),
        ("DELETE", "/webhooks/indexing"),
        ("POST", "/webhooks/indexing/signing-secret"),
        ("DELETE", "/webhooks/indexing/signing-secret"),
        ("GET", "/webhooks/indexing/deliveries"),
        ("GET", "/webhooks/indexing/deliveries/{delivery_id}"),
        ("POST", "/webhooks/indexing/deliveries/{delivery_id}/retry"),
        ("POST", "/webhooks/indexing/test"),
    }
)


def answers_bare(route: tuple[str, str] | None) -> bool:
    return route in BARE_IN_REFERENCE


def both_readers(envelope: dict[str, Any]) -> dict[str, Any]:
    """The envelope with its `data` object's fields also at the top level (the envelope's keys win)."""
    data = envelope.get("data")
    if not isinstance(data, dict):
        return envelope
    return {**data, **envelope}
