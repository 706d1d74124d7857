"""What the Notion provider declares: catalogue entry, credential schema, and credential validation."""

from __future__ import annotations

from typing import Any

from ctxstore.connectors.credential_checks import oauth_credentials, token_credentials
from ctxstore.connectors.provider_catalogue import (
    EXPIRES_AT,
    OAUTH_REQUIRED,
    metadata_field,
    oauth_schema,
    origin_fields,
    token_field,
)
from ctxstore.ports.connector_provider import FieldInfo, ProviderInfo

MAX_TOKEN_CHARS = 2048

CREDENTIAL_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "title": "api_token",
            "description": "An internal integration secret (auth_type api_token).",
            "type": "object",
            "properties": {"access_token": token_field("ntn_… (or secret_… for older integrations)")},
            "required": ["access_token"],
            "additionalProperties": False,
        },
        oauth_schema(
            "A public integration's OAuth token pair (auth_type oauth).",
            access_token="refreshed before expires_at, or when Notion refuses it",
            refresh_token="Notion returns a new one with every refresh",
            client_id="the public integration's OAuth client id",
            client_secret="the public integration's OAuth client secret",
            expires_at=EXPIRES_AT,
        ),
    ]
}

SETUP_GUIDE = (
    "api_token: create an internal integration (Settings → Connections → Develop or manage integrations) with"
    " the 'Read content' capability, share each page or database to sync with it (page menu → Connections), and"
    " pass its secret as access_token. oauth: a public integration's access_token and refresh_token (from the"
    " OAuth code exchange) with its client_id and client_secret; tokens are refreshed at /v1/oauth/token and the"
    " rotated refresh token is stored back automatically. Resources are pages (with every page below them) and"
    " data sources (database rows), as discover lists them."
)

INFO = ProviderInfo(
    provider="notion",
    category="wiki",
    display_name="Notion",
    auth_types=("api_token", "oauth"),
    credential_schema=CREDENTIAL_SCHEMA,
    resource_types=("page", "data_source"),
    indexed_object_types=("page", "data_source"),
    searchable_fields=(
        FieldInfo("title", "string", "page or data source title"),
        FieldInfo("text", "string", "the page as markdown: title, row properties, block tree"),
    ),
    filterable_fields=(
        *origin_fields("notion"),
        metadata_field("notion_page_id", "string", "page id (pages and rows)"),
        metadata_field("notion_parent_id", "string", "the page or data source it sits in"),
        metadata_field("notion_data_source_id", "string", "data source of a row (or the data source itself)"),
        metadata_field("notion_object", "string", "page or data_source"),
        metadata_field("author", "string", "user id of the creator"),
    ),
    default_sync_interval_s=3600,
    min_sync_interval_s=300,
    max_sync_interval_s=604800,
    setup_guide=SETUP_GUIDE,
    # Every cycle: a trashed or unshared page leaves search without an edit the incremental pass could see,
    # so the listing (about one search call per 100 pages) is the only way deletions show up.
    reconcile_interval_s=0,
)


def validate_credentials(auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
    """The normalised credential set for `auth_type`; ValueError names the field (never echoes a secret)."""
    if not isinstance(credentials, dict):
        raise ValueError("credentials must be an object")
    if auth_type == "api_token":
        what = "a Notion integration secret"
        return token_credentials(
            credentials, ("access_token",), provider="Notion", what=what, max_chars=MAX_TOKEN_CHARS
        )
    if auth_type == "oauth":
        return oauth_credentials(credentials, provider="Notion", required=OAUTH_REQUIRED, max_chars=MAX_TOKEN_CHARS)
    raise ValueError(f"auth_type must be one of api_token, oauth (got {auth_type!r})")
