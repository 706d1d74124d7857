"""What the Notion provider declares: catalogue entry, credential schema, and credential validation."""

from __future__ import annotations

from typing import Any

from ctxstore.ports.connector_provider import FieldInfo, ProviderInfo

_TOKEN = {"type": "string", "minLength": 1}

CREDENTIAL_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "title": "api_token",
            "description": "An internal integration secret (auth_type api_token).",
            "type": "object",
            "properties": {"access_token": {**_TOKEN, "description": "ntn_… (or secret_… for older integrations)"}},
            "required": ["access_token"],
            "additionalProperties": False,
        },
        {
            "title": "oauth",
            "description": "A public integration's OAuth token pair (auth_type oauth).",
            "type": "object",
            "properties": {
                "access_token": {**_TOKEN, "description": "refreshed before expires_at, or when Notion refuses it"},
                "refresh_token": {**_TOKEN, "description": "Notion returns a new one with every refresh"},
                "client_id": {**_TOKEN, "description": "the public integration's OAuth client id"},
                "client_secret": {**_TOKEN, "description": "the public integration's OAuth client secret"},
                "expires_at": {"type": "number", "description": "epoch seconds when access_token expires"},
            },
            "required": ["access_token", "refresh_token", "client_id", "client_secret"],
            "additionalProperties": False,
        },
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
        FieldInfo("provider", "string", "always 'notion'", "provider"),
        FieldInfo("connector_id", "string", "the connector that synced it", "connector_id"),
        FieldInfo("notion_page_id", "string", "page id (pages and rows)", "additional_metadata.notion_page_id"),
        FieldInfo(
            "notion_parent_id", "string", "the page or data source it sits in", "additional_metadata.notion_parent_id"
        ),
        FieldInfo(
            "notion_data_source_id",
            "string",
            "data source of a row (or the data source itself)",
            "additional_metadata.notion_data_source_id",
        ),
        FieldInfo("notion_object", "string", "page or data_source", "additional_metadata.notion_object"),
        FieldInfo("author", "string", "user id of the creator", "additional_metadata.author"),
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
        _reject_unknown(credentials, {"access_token"}, auth_type)
        if "access_token" not in credentials:
            raise ValueError("credentials.access_token is required (a Notion integration secret)")
        return {"access_token": _token(credentials, "access_token")}
    if auth_type != "oauth":
        raise ValueError(f"auth_type must be one of api_token, oauth (got {auth_type!r})")
    _reject_unknown(
        credentials, {"access_token", "refresh_token", "client_id", "client_secret", "expires_at"}, auth_type
    )
    out: dict[str, Any] = {}
    for key in ("access_token", "refresh_token", "client_id", "client_secret"):
        if key not in credentials:
            raise ValueError(f"credentials.{key} is required for auth_type oauth")
        out[key] = _token(credentials, key)
    expires_at = credentials.get("expires_at")
    if expires_at is not None:
        if isinstance(expires_at, bool) or not isinstance(expires_at, int | float) or expires_at < 0:
            raise ValueError("credentials.expires_at must be epoch seconds (a non-negative number)")
        out["expires_at"] = float(expires_at)
    return out


def _token(credentials: dict[str, Any], key: str) -> str:
    value = credentials[key]
    if not isinstance(value, str) or not value.strip() or len(value) > 2048 or any(c.isspace() for c in value.strip()):
        raise ValueError(f"credentials.{key} must be a non-empty string without spaces")
    return value.strip()


def _reject_unknown(credentials: dict[str, Any], allowed: set[str], auth_type: str) -> None:
    unknown = sorted(set(credentials) - allowed)
    if unknown:
        raise ValueError(f"credentials.{unknown[0]} is not a field of Notion auth_type {auth_type}")
