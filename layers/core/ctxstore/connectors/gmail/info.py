"""What the Gmail provider declares: catalogue entry, credential schema, and credential validation.

Gmail is OAuth only (there are no Gmail API keys for a user's mailbox): the connector stores the user's
access token, refresh token and its expiry, and the OAuth client the refresh token was issued to.
"""

from __future__ import annotations

from typing import Any

from ctxstore.connectors.provider_catalogue import EXPIRES_AT, metadata_field, oauth_schema, origin_fields
from ctxstore.ports.connector_provider import FieldInfo, ProviderInfo

READ_SCOPE = "https://www.googleapis.com/auth/gmail.readonly"

CREDENTIAL_SCHEMA: dict[str, Any] = oauth_schema(
    "A Google OAuth user grant for the mailbox (auth_type oauth), with the scope " + READ_SCOPE + ".",
    access_token="ya29.…; refreshed before it expires",
    refresh_token="1//…; from an authorisation with access_type=offline",
    client_id="the OAuth client id (…apps.googleusercontent.com)",
    client_secret="the OAuth client secret",
    expires_at=EXPIRES_AT,
)

SETUP_GUIDE = (
    "In a Google Cloud project enable the Gmail API, configure the OAuth consent screen and create an OAuth "
    "client (web application). Authorise the mailbox with the scope " + READ_SCOPE + ", access_type=offline "
    "and prompt=consent, and send the grant as auth_type oauth: access_token, refresh_token, expires_at, "
    "client_id, client_secret. Refresh tokens of a consent screen in 'Testing' status expire after 7 days: "
    "publish the app (or use an internal Workspace app). Each label is a resource (INBOX, SENT, your labels). "
    "provider_account_scope stays empty (one Gmail connector per organisation); the mailbox address is in "
    "each item's additional_metadata.account_email. To sync a second mailbox, give its connector a "
    "provider_account_scope of your choice."
)


INFO = ProviderInfo(
    provider="gmail",
    category="mail",
    display_name="Gmail",
    auth_types=("oauth",),
    credential_schema=CREDENTIAL_SCHEMA,
    resource_types=("label",),
    indexed_object_types=("email",),
    searchable_fields=(
        FieldInfo("title", "string", "the subject"),
        FieldInfo("text", "string", "From/To/Date/Subject lines and the body (text/plain, else HTML as text)"),
    ),
    filterable_fields=(
        *origin_fields("gmail"),
        metadata_field("account_email", "string", "the mailbox the message was synced from"),
        metadata_field("gmail_message_id", "string", "Gmail message id"),
        metadata_field("gmail_thread_id", "string", "Gmail thread id"),
        metadata_field("gmail_from", "string", "sender address"),
        metadata_field("gmail_to", "string[]", "recipient addresses (To and Cc)"),
        metadata_field("gmail_rfc822_message_id", "string", "the Message-ID header"),
    ),
    default_sync_interval_s=3600,
    # An idle label costs one history.list call (2 quota units of 15,000 per user per minute).
    min_sync_interval_s=300,
    max_sync_interval_s=604800,
    setup_guide=SETUP_GUIDE,
    # Deletions arrive through history (messagesDeleted, labelsRemoved); a listing is needed only after a
    # history gap forced a resync, and then over every object the resource holds (gmail_sync.reconcile).
    reconcile_window_s=None,
    # Asked every cycle: `reconcile` answers None (no call) unless a resync after a gap asked for a listing,
    # which should run on the next cycle, not hours later.
    reconcile_interval_s=0,
)


def validate_credentials(auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
    """The normalised credential set; ValueError names the field (never echoes a secret)."""
    if auth_type != "oauth":
        raise ValueError("Gmail connectors use auth_type oauth (a Google OAuth grant for the mailbox)")
    if not isinstance(credentials, dict):
        raise ValueError("credentials must be an object")
    allowed = set(CREDENTIAL_SCHEMA["properties"])
    unknown = sorted(set(credentials) - allowed)
    if unknown:
        raise ValueError(f"credentials.{unknown[0]} is not a Gmail credential field ({', '.join(sorted(allowed))})")
    out: dict[str, Any] = {}
    for key in CREDENTIAL_SCHEMA["required"]:
        value = credentials.get(key)
        if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
            raise ValueError(f"credentials.{key} is required: a non-empty string without spaces")
        out[key] = value.strip()
    expires_at = credentials.get("expires_at")
    if expires_at is not None:
        if isinstance(expires_at, bool) or not isinstance(expires_at, int | float) or expires_at < 0:
            raise ValueError("credentials.expires_at must be epoch seconds (a non-negative number)")
        out["expires_at"] = float(expires_at)
    return out
