"""What the GitHub provider declares: catalogue entry, credential schema, and credential validation."""

from __future__ import annotations

from typing import Any

from ctxstore.connectors.credential_checks import oauth_credentials, token_credentials
from ctxstore.connectors.provider_catalogue import EPOCH, oauth_schema, token_field
from ctxstore.ports.connector_provider import FieldInfo, ProviderInfo

CREDENTIAL_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "title": "api_token",
            "description": "A fine-grained or classic personal access token (auth_type api_token).",
            "type": "object",
            "properties": {
                "api_token": token_field("github_pat_… or ghp_…"),
                "access_token": token_field("alias of api_token"),
            },
            "anyOf": [{"required": ["api_token"]}, {"required": ["access_token"]}],
            "additionalProperties": False,
        },
        oauth_schema(
            "A GitHub App user token with its rotating refresh token (auth_type oauth).",
            access_token="ghu_…; refreshed when missing or expired",
            refresh_token="ghr_…; GitHub rotates it on every refresh",
            client_id="the GitHub App's client id",
            client_secret="the GitHub App's client secret",
            extra={"refresh_token_expires_at": EPOCH},
            required=("refresh_token", "client_id", "client_secret"),
        ),
    ]
}

SETUP_GUIDE = (
    "api_token: a fine-grained personal access token with read-only 'Issues', 'Pull requests' and 'Metadata' "
    "on the repositories to sync (or a classic token with 'repo', or 'public_repo' for public repositories only). "
    "oauth: a GitHub App user-to-server token pair (access_token, refresh_token) with the App's client_id and "
    "client_secret; the App needs read access to Issues, Pull requests and Metadata. Refresh tokens rotate on "
    "every use and are stored back automatically. A classic OAuth App token (gho_…) never expires: use it as "
    "api_token. Each repository is a resource 'owner/repo'."
)


def _field(name: str, data_type: str, description: str, *, filterable: bool = True) -> FieldInfo:
    return FieldInfo(name, data_type, description, filter_key=name if filterable else None)


INFO = ProviderInfo(
    provider="github",
    category="code",
    display_name="GitHub",
    auth_types=("api_token", "oauth"),
    credential_schema=CREDENTIAL_SCHEMA,
    resource_types=("repo",),
    indexed_object_types=("issue", "pull_request", "comment"),
    searchable_fields=(
        FieldInfo("title", "string", "issue or pull request title; 'Comment on owner/repo#N' for comments"),
        FieldInfo("text", "string", "body in markdown, with state, labels and author for issues and PRs"),
    ),
    filterable_fields=(
        _field("github_repo", "string", "owner/repo"),
        _field("github_issue_number", "integer", "issue or pull request number (of the parent, for comments)"),
        _field("github_state", "string", "open or closed (issues and pull requests)"),
        _field("github_labels", "string[]", "label names (issues and pull requests)"),
        _field("github_is_pull_request", "boolean", "true for pull requests"),
        _field("github_author", "string", "login of the author"),
        _field("github_comment_id", "integer", "comment id (comments)"),
    ),
    default_sync_interval_s=3600,
    # One cycle costs at least three requests; an unchanged repo answers 304s, which cost no rate limit.
    min_sync_interval_s=300,
    max_sync_interval_s=604800,
    setup_guide=SETUP_GUIDE,
    # Deletions leave no trace in GitHub's lists: reconcile lists the last 30 days' objects (one request per
    # 100 objects per stream), so at most every 6 hours per repository rather than every cycle.
    reconcile_window_s=30 * 86400,
    reconcile_interval_s=6 * 3600,
)


def validate_credentials(auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
    """The normalised credential set for `auth_type`; ValueError names the field (never echoes a secret)."""
    if not isinstance(credentials, dict):
        raise ValueError("credentials must be an object")
    if auth_type == "api_token":
        keys = ("api_token", "access_token")
        return token_credentials(credentials, keys, provider="GitHub", what="a GitHub personal access token")
    if auth_type == "oauth":
        return oauth_credentials(
            credentials,
            provider="GitHub",
            required=("refresh_token", "client_id", "client_secret"),
            optional=("access_token",),
            epochs=("expires_at", "refresh_token_expires_at"),
        )
    raise ValueError(f"auth_type must be one of api_token, oauth (got {auth_type!r})")
