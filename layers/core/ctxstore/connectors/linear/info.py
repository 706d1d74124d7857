"""What the Linear provider declares: catalogue entry, credential schema, credential validation, auth header."""

from __future__ import annotations

from typing import Any

from ctxstore.connectors.credential_checks import oauth_credentials, token_credentials
from ctxstore.connectors.provider_catalogue import (
    OAUTH_REQUIRED,
    metadata_field,
    oauth_schema,
    origin_fields,
    token_field,
)
from ctxstore.ports.connector_provider import FieldInfo, ProviderInfo

PERSONAL_KEY_PREFIX = "lin_api_"

CREDENTIAL_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "title": "api_token",
            "description": "A personal API key, or a long-lived OAuth access token (auth_type api_token).",
            "type": "object",
            "properties": {
                "access_token": token_field("lin_api_… (personal key) or a non-expiring OAuth token"),
                "api_key": token_field("alias of access_token"),
            },
            "anyOf": [{"required": ["access_token"]}, {"required": ["api_key"]}],
            "additionalProperties": False,
        },
        oauth_schema(
            "An OAuth2 app token pair with its rotating refresh token (auth_type oauth).",
            access_token="lin_oauth_…; expires after 24 h",
            refresh_token="rotated by Linear on every refresh",
            client_id="the OAuth2 application's client id",
            client_secret="the OAuth2 application's client secret",
        ),
    ]
}

SETUP_GUIDE = (
    "api_token: a personal API key (Linear: Settings > Security & access > Personal API keys, read access), "
    "sent as 'Authorization: <key>'. oauth: an OAuth2 application token pair (scope 'read'; refresh tokens "
    "are mandatory for OAuth apps since 2026-04-01) with the application's client_id and client_secret; "
    "access tokens last 24 h, refresh tokens rotate on every use and are stored back automatically. "
    "Each team the key's user can see is a resource; private teams need membership."
)


INFO = ProviderInfo(
    provider="linear",
    category="issue_tracker",
    display_name="Linear",
    auth_types=("api_token", "oauth"),
    credential_schema=CREDENTIAL_SCHEMA,
    resource_types=("linear_team",),
    indexed_object_types=("issue", "comment"),
    searchable_fields=(
        FieldInfo("title", "string", "'ENG-12 Issue title'; 'Comment on ENG-12 by Name' for comments"),
        FieldInfo("text", "string", "description or comment body (markdown) under a line of state, labels, people"),
    ),
    filterable_fields=(
        *origin_fields("linear"),
        metadata_field("linear_team_key", "string", "team key, e.g. ENG"),
        metadata_field("linear_identifier", "string", "issue identifier, e.g. ENG-12 (of the issue, for comments)"),
        metadata_field("linear_state", "string", "workflow state name (issues)"),
        metadata_field(
            "linear_state_type", "string", "triage, backlog, unstarted, started, completed or canceled (issues)"
        ),
        metadata_field("linear_priority", "string", "No priority, Urgent, High, Medium or Low (issues)"),
        metadata_field("linear_labels", "string[]", "label names (issues)"),
        metadata_field("linear_assignee", "string", "assignee's name (issues)"),
        metadata_field("linear_author", "string", "creator of the issue or author of the comment"),
    ),
    default_sync_interval_s=3600,
    # An idle team costs two small requests per cycle (issues and comments changed since the cursor) plus
    # reconcile (one request per 100 objects created in the last 30 days); a personal key has 2,500/h.
    min_sync_interval_s=300,
    max_sync_interval_s=604800,
    setup_guide=SETUP_GUIDE,
)


def validate_credentials(auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
    """The normalised credential set for `auth_type`; ValueError names the field (never echoes a secret)."""
    if not isinstance(credentials, dict):
        raise ValueError("credentials must be an object")
    if auth_type == "api_token":
        keys = ("access_token", "api_key")
        return token_credentials(credentials, keys, provider="Linear", what="a Linear personal API key, lin_api_…")
    if auth_type == "oauth":
        return oauth_credentials(credentials, provider="Linear", required=OAUTH_REQUIRED)
    raise ValueError(f"auth_type must be one of api_token, oauth (got {auth_type!r})")


def authorization(auth_type: str, credentials: dict[str, Any]) -> str:
    """The Authorization header: a personal API key goes bare (Linear's rule), an OAuth token as Bearer."""
    token = str(credentials.get("access_token") or credentials.get("api_key") or "")
    if auth_type == "api_token" and token.startswith(PERSONAL_KEY_PREFIX):
        return token
    return f"Bearer {token}"
