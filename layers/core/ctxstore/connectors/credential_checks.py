"""Credential-shape checks shared by providers' ``validate_credentials`` (no network call, no secret echoed).

Two shapes cover the providers with both auth types: ``api_token`` is one token under a key or its alias
(the key the caller used is kept, so a later credentials update with the same key replaces it), and
``oauth`` is a token bundle with required and optional tokens and epoch-second expiry times.
"""

from __future__ import annotations

from typing import Any

MAX_TOKEN_CHARS = 4096


def token(credentials: dict[str, Any], key: str, max_chars: int = MAX_TOKEN_CHARS) -> str:
    """A token field: a non-empty string without spaces, stripped."""
    value = credentials[key]
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > max_chars
        or any(c.isspace() for c in value.strip())
    ):
        raise ValueError(f"credentials.{key} must be a non-empty string without spaces")
    return value.strip()


def reject_unknown(credentials: dict[str, Any], allowed: set[str], provider: str, auth_type: str) -> None:
    unknown = sorted(set(credentials) - allowed)
    if unknown:
        raise ValueError(f"credentials.{unknown[0]} is not a field of {provider} auth_type {auth_type}")


def token_credentials(
    credentials: dict[str, Any],
    keys: tuple[str, ...],
    *,
    provider: str,
    what: str,
    max_chars: int = MAX_TOKEN_CHARS,
) -> dict[str, str]:
    """``api_token``: one token under ``keys[0]`` or its alias ``keys[1]`` if any (both given must agree)."""
    reject_unknown(credentials, set(keys), provider, "api_token")
    given = {k: token(credentials, k, max_chars) for k in keys if k in credentials}
    if not given:
        raise ValueError(f"credentials.{keys[0]} is required ({what})")
    if len(set(given.values())) > 1:
        raise ValueError(f"credentials.{keys[0]} and its alias credentials.{keys[1]} differ: send one of them")
    key = next(k for k in keys if k in given)
    return {key: given[key]}


def oauth_credentials(
    credentials: dict[str, Any],
    *,
    provider: str,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    epochs: tuple[str, ...] = ("expires_at",),
    max_chars: int = MAX_TOKEN_CHARS,
) -> dict[str, Any]:
    """``oauth``: the required and optional token fields, and expiry times as float epoch seconds."""
    reject_unknown(credentials, {*required, *optional, *epochs}, provider, "oauth")
    normalised: dict[str, Any] = {}
    for key in required:
        if key not in credentials:
            raise ValueError(f"credentials.{key} is required for auth_type oauth")
        normalised[key] = token(credentials, key, max_chars)
    for key in optional:
        if key in credentials:
            normalised[key] = token(credentials, key, max_chars)
    for key in epochs:
        value = credentials.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"credentials.{key} must be epoch seconds (a non-negative number)")
        normalised[key] = float(value)
    return normalised
