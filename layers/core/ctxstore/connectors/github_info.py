"""What the GitHub provider declares: catalogue entry, credential schema, and credential validation."""

from __future__ import annotations

from typing import Any

from ctxstore.ports.connector_provider import FieldInfo, ProviderInfo

_TOKEN = {"type": "string", "minLength": 1}
_EPOCH = {"type": "number", "description": "epoch seconds"}

CREDENTIAL_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "title": "api_token",
            "description": "A fine-grained or classic personal access token (auth_type api_token).",
            "type": "object",
            "properties": {
                "api_token": {**_TOKEN, "description": "github_pat_… or ghp_…"},
                "access_token": {**_TOKEN, "description": "alias of api_token"},
            },
            "anyOf": [{"required": ["api_token"]}, {"required": ["access_token"]}],
            "additionalProperties": False,
        },
        {
            "title": "oauth",
            "description": "A GitHub App user token with its rotating refresh token (auth_type oauth).",
            "type": "object",
            "properties": {
                "access_token": {**_TOKEN, "description": "ghu_…; refreshed when missing or expired"},
                "refresh_token": {**_TOKEN, "description": "ghr_…; GitHub rotates it on every refresh"},
                "client_id": {**_TOKEN, "description": "the GitHub App's client id"},
                "client_secret": {**_TOKEN, "description": "the GitHub App's client secret"},
                "expires_at": _EPOCH,
                "refresh_token_expires_at": _EPOCH,
            },
            "required": ["refresh_token", "client_id", "client_secret"],
            "additionalProperties": False,
        },
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
        return _validate_token(credentials)
    if auth_type == "oauth":
        return _validate_oauth(credentials)
    raise ValueError(f"auth_type must be one of api_token, oauth (got {auth_type!r})")


def _validate_token(credentials: dict[str, Any]) -> dict[str, Any]:
    _reject_unknown(credentials, {"api_token", "access_token"}, "api_token")
    given: dict[str, str] = {k: _token(credentials, k) for k in ("api_token", "access_token") if k in credentials}
    if not given:
        raise ValueError("credentials.api_token is required (a GitHub personal access token)")
    if len(set(given.values())) > 1:
        raise ValueError("credentials.api_token and its alias credentials.access_token differ: send one of them")
    # Keep the key the caller used, so a later credentials update with the same key replaces it.
    key = "api_token" if "api_token" in given else "access_token"
    return {key: given[key]}


def _validate_oauth(credentials: dict[str, Any]) -> dict[str, Any]:
    allowed = {"access_token", "refresh_token", "client_id", "client_secret", "expires_at", "refresh_token_expires_at"}
    _reject_unknown(credentials, allowed, "oauth")
    normalised: dict[str, Any] = {}
    for key in ("refresh_token", "client_id", "client_secret"):
        if key not in credentials:
            raise ValueError(f"credentials.{key} is required for auth_type oauth")
        normalised[key] = _token(credentials, key)
    if "access_token" in credentials:
        normalised["access_token"] = _token(credentials, "access_token")
    for key in ("expires_at", "refresh_token_expires_at"):
        value = credentials.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"credentials.{key} must be epoch seconds (a non-negative number)")
        normalised[key] = float(value)
    return normalised


def _token(credentials: dict[str, Any], key: str) -> str:
    value = credentials[key]
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise ValueError(f"credentials.{key} must be a non-empty string without spaces")
    return value.strip()


def _reject_unknown(credentials: dict[str, Any], allowed: set[str], auth_type: str) -> None:
    unknown = sorted(set(credentials) - allowed)
    if unknown:
        raise ValueError(f"credentials.{unknown[0]} is not a field of GitHub auth_type {auth_type}")
