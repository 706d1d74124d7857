"""What the Slack provider tells the catalogue: its credential schema, resources, fields and cadence."""

from __future__ import annotations

from typing import Any

from ctxstore.ports.connector_provider import (
    FieldInfo,
    ProviderInfo,
)

THREAD_WINDOW_S = 7 * 86400  # the window each pass re-reads (see `slack`)

CREDENTIAL_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "title": "api_token",
            "type": "object",
            "properties": {"access_token": {"type": "string", "description": "a bot (xoxb-) or user (xoxp-) token"}},
            "required": ["access_token"],
        },
        {
            "title": "oauth",
            "type": "object",
            "properties": {
                "access_token": {"type": "string"},
                "refresh_token": {"type": "string", "description": "from an app with token rotation (xoxe-)"},
                "expires_at": {"type": "number", "description": "epoch seconds when access_token expires"},
                "client_id": {"type": "string"},
                "client_secret": {"type": "string"},
            },
            "required": ["access_token", "refresh_token", "client_id", "client_secret"],
        },
    ]
}

INFO = ProviderInfo(
    provider="slack",
    category="chat",
    display_name="Slack",
    auth_types=("api_token", "oauth"),
    credential_schema=CREDENTIAL_SCHEMA,
    resource_types=("channel",),
    indexed_object_types=("message",),
    searchable_fields=(
        FieldInfo("text", "string", "the message text (with file names)"),
        FieldInfo("title", "string", "#channel and the message's first line"),
    ),
    filterable_fields=(
        FieldInfo("provider", "string", "always 'slack'", "provider"),
        FieldInfo("connector_id", "string", "the connector that synced it", "connector_id"),
        FieldInfo("slack_channel", "string", "channel id", "additional_metadata.slack_channel"),
        FieldInfo("slack_channel_name", "string", "channel name", "additional_metadata.slack_channel_name"),
        FieldInfo("slack_ts", "string", "message ts", "additional_metadata.slack_ts"),
        FieldInfo("slack_thread_ts", "string", "thread root ts", "additional_metadata.slack_thread_ts"),
        FieldInfo("author", "string", "user or bot id", "additional_metadata.author"),
    ),
    default_sync_interval_s=3600,
    min_sync_interval_s=300,
    max_sync_interval_s=604800,
    setup_guide=(
        "Create a Slack app, add the bot scopes channels:read, channels:history, groups:read and"
        " groups:history, install it and invite it to each channel to sync; pass the bot token (xoxb-) as"
        " access_token. With token rotation enabled, use auth_type oauth with access_token, refresh_token,"
        " expires_at, client_id and client_secret."
    ),
    reconcile_window_s=THREAD_WINDOW_S,
    # Every cycle: the listing re-reads the window the incremental pass has just read (one or a few history
    # pages) and vouches for threads without a call, so deletions show on the next cycle for almost nothing.
    reconcile_interval_s=0,
)
