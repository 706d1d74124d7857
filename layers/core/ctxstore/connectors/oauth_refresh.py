"""One OAuth 2.0 refresh-token grant (RFC 6749 section 6) at a provider's token endpoint, shared by providers.

The connector service owns rotation (services/connectors/credentials.py: serialised per connector, the
rotated set persisted compare-and-set before anything uses it). A provider's ``refresh`` is this single
exchange: POST ``grant_type=refresh_token`` with the client credentials in the form body, read the JSON
answer, and return the whole credential set with the new access token, the rotated refresh token (when the
provider sent one) and their expiry times. Nothing is stored here.

Error policy, whatever the HTTP status (GitHub answers refused grants with 200, Linear with 400):
- an ``error`` the provider uses for a dead grant (``invalid_grant`` and its spellings) -> ``RefreshRejected``
  (the connector needs re-authorisation);
- an ``error`` naming the client (``invalid_client``: wrong client id or secret) -> ``CredentialsRejected``;
- 5xx, timeouts, connection failures, a body that is not JSON, any other error or an answer without an
  access token -> ``TransientProviderError`` (retried next cycle).
"""

from __future__ import annotations

from typing import Any

import httpx

from ctxstore.ports.connector_provider import (
    CredentialsRejected,
    ProviderContext,
    RefreshRejected,
    TransientProviderError,
)

# Grant errors that mean "this refresh token is dead: the user must authorise again" (RFC 6749 invalid_grant,
# GitHub's bad_refresh_token, Slack-style spellings).
REJECTED_GRANTS = frozenset({"invalid_grant", "bad_refresh_token", "expired_token", "invalid_refresh_token"})
# Errors that mean the OAuth app's settings (client id / secret) are wrong: fixed by a credential update.
BAD_CLIENT = frozenset({"invalid_client", "unauthorized_client", "incorrect_client_credentials"})
# (lifetime field of the answer, credential field holding the absolute expiry in epoch seconds)
EXPIRIES = (("expires_in", "expires_at"), ("refresh_token_expires_in", "refresh_token_expires_at"))


def refresh_token_grant(ctx: ProviderContext, *, provider: str, token_url: str, user_agent: str) -> dict[str, Any]:
    """Exchange ``ctx.credentials['refresh_token']`` at ``token_url``; the whole rotated set (see module doc)."""
    creds = ctx.credentials
    if not creds.get("refresh_token"):
        raise CredentialsRejected(f"no refresh_token to renew the {provider} access token with")
    form = {
        "grant_type": "refresh_token",
        "refresh_token": str(creds["refresh_token"]),
        "client_id": str(creds.get("client_id", "")),
        "client_secret": str(creds.get("client_secret", "")),
    }
    try:
        response = httpx.post(
            token_url,
            data=form,
            headers={"Accept": "application/json", "User-Agent": user_agent},
            timeout=ctx.http_timeout_s,
        )
    except httpx.TimeoutException:
        raise TransientProviderError(f"{provider} token endpoint timed out") from None
    except httpx.HTTPError as exc:
        raise TransientProviderError(f"{provider} token endpoint unreachable: {type(exc).__name__}") from None
    if response.status_code >= 500:
        raise TransientProviderError(f"{provider} token endpoint answered {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        status = response.status_code
        raise TransientProviderError(f"{provider} token endpoint answered {status} without JSON") from None
    error = str(body.get("error", "")) if isinstance(body, dict) else "malformed"
    if error in REJECTED_GRANTS:
        raise RefreshRejected(f"{provider} rejected the refresh token ({error}): authorise the connector again")
    if error in BAD_CLIENT:
        raise CredentialsRejected(f"{provider} rejected the OAuth app credentials ({error})")
    if error or not isinstance(body, dict) or not body.get("access_token"):
        raise TransientProviderError(f"{provider} token endpoint refused the refresh ({error or response.status_code})")
    now = ctx.now()
    rotated = {**creds, "access_token": str(body["access_token"])}
    if body.get("refresh_token"):
        rotated["refresh_token"] = str(body["refresh_token"])
    for lifetime, field in EXPIRIES:
        value = body.get(lifetime)
        if isinstance(value, int | float) and not isinstance(value, bool):
            rotated[field] = now + float(value)
        else:
            rotated.pop(field, None)
    return rotated
