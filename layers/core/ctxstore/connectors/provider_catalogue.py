"""Builders for what providers declare in the catalogue: credential schema parts and filterable fields.

The shapes are the same across providers (a token is a non-empty string; an OAuth bundle is an access and a
refresh token with the client they were issued to); only the descriptions are the provider's own.
"""

from __future__ import annotations

from typing import Any

from ctxstore.ports.connector_provider import FieldInfo

TOKEN: dict[str, Any] = {"type": "string", "minLength": 1}
EPOCH: dict[str, Any] = {"type": "number", "description": "epoch seconds"}
EXPIRES_AT: dict[str, Any] = {"type": "number", "description": "epoch seconds when access_token expires"}
OAUTH_REQUIRED = ("access_token", "refresh_token", "client_id", "client_secret")


def token_field(description: str) -> dict[str, Any]:
    return {**TOKEN, "description": description}


def oauth_schema(
    description: str,
    *,
    access_token: str,
    refresh_token: str,
    client_id: str,
    client_secret: str,
    expires_at: dict[str, Any] = EPOCH,
    extra: dict[str, Any] | None = None,
    required: tuple[str, ...] = OAUTH_REQUIRED,
    title: str = "oauth",
) -> dict[str, Any]:
    """The JSON schema of an OAuth token bundle; the arguments describe each token field."""
    return {
        "title": title,
        "description": description,
        "type": "object",
        "properties": {
            "access_token": token_field(access_token),
            "refresh_token": token_field(refresh_token),
            "client_id": token_field(client_id),
            "client_secret": token_field(client_secret),
            "expires_at": expires_at,
            **(extra or {}),
        },
        "required": list(required),
        "additionalProperties": False,
    }


def origin_fields(provider: str) -> tuple[FieldInfo, FieldInfo]:
    """The filterable fields every connector item has: its provider and the connector that synced it."""
    return (
        FieldInfo("provider", "string", f"always '{provider}'", "provider"),
        FieldInfo("connector_id", "string", "the connector that synced it", "connector_id"),
    )


def metadata_field(name: str, data_type: str, description: str) -> FieldInfo:
    """A provider field of additional_metadata: filtered as metadata_filters.additional_metadata.<name>."""
    return FieldInfo(name, data_type, description, filter_key=f"additional_metadata.{name}")
