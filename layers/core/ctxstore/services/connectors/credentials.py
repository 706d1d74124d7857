"""Connector credentials: sealed by the vault in their own record, opened only to build a provider call.

OAuth rotation is done here, not in providers, so every provider gets the same guarantees:
- refresh before expiry (`expires_at` within REFRESH_SKEW_S) and once after a call raises TokenExpired;
- one refresh at a time per connector (a leased lock record, the same mechanism as item locks), and the
  credential record re-read under it, so a second caller uses the first caller's new tokens instead of
  spending the same single-use refresh token again;
- the rotated set is written compare-and-set on the credential record BEFORE anything uses it;
- a refused grant sets `needs_reauth` (+ when and why); the next successful rotation clears it.
Credentials never appear in a record in clear, in a log line, or in an answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from ctxstore.domain.clock_utils import iso
from ctxstore.ports.clock import Clock
from ctxstore.ports.connector_provider import (
    AccountInfo,
    ConnectorProvider,
    CredentialsRejected,
    ProviderContext,
    RefreshRejected,
    TokenExpired,
    TransientProviderError,
    oauth_expiring,
)
from ctxstore.ports.credential_vault import CredentialVault
from ctxstore.ports.records import ConditionFailed, Put, RecordStore
from ctxstore.services import record_kinds as rk
from ctxstore.services.connectors.store import ConnectorStore
from ctxstore.services.items.locks import ItemLocks

log = logging.getLogger("ctxstore.connectors")
REFRESH_LOCK_WAIT_S = 60.0
T = TypeVar("T")


def lock_pk(connector_id: str) -> str:
    return f"connector{rk.SEP}{connector_id}"


class CredentialStore:
    def __init__(self, records: RecordStore, vault: Callable[[], CredentialVault], clock: Clock) -> None:
        """`vault`: a provider, opened only to seal or open credentials (on AWS reading it builds the KMS client;
        most connector calls never need it)."""
        self._records = records
        self._vault = vault
        self._clock = clock

    def sealed_put(self, org: str, connector_id: str, credentials: dict[str, Any], *, if_version: int | None) -> Put:
        sealed = self._vault().seal(org, connector_id, json.dumps(credentials, separators=(",", ":")).encode())
        data = {"sealed": sealed, "updated_at": self._clock.now()}
        return Put(
            rk.CONNECTOR_CREDENTIALS, "", connector_id, data, if_absent=if_version is None, if_version=if_version
        )

    def load(self, org: str, connector_id: str) -> tuple[dict[str, Any], int]:
        rec = self._records.get(org, rk.CONNECTOR_CREDENTIALS, "", connector_id)
        if rec is None:
            raise TransientProviderError("the connector's credentials are missing; update them with PATCH")
        creds: dict[str, Any] = json.loads(self._vault().open(org, connector_id, str(rec.data["sealed"])))
        return creds, rec.version

    def save(self, org: str, connector_id: str, credentials: dict[str, Any], *, if_version: int) -> int:
        """Compare-and-set: ConditionFailed when another writer replaced the set since `if_version`."""
        return self._records.put(org, self.sealed_put(org, connector_id, credentials, if_version=if_version)).version

    def delete(self, org: str, connector_id: str) -> None:
        self._records.delete(org, rk.CONNECTOR_CREDENTIALS, "", connector_id)


class ConnectorAuth:
    """Builds the ProviderContext of one call: credentials opened, refreshed when due, rotation persisted."""

    def __init__(
        self,
        credentials: CredentialStore,
        connectors: ConnectorStore,
        locks: ItemLocks,
        clock: Clock,
        context_defaults: Callable[[str], dict[str, Any]],
    ) -> None:
        self._creds = credentials
        self._connectors = connectors
        self._locks = locks
        self._clock = clock
        self._defaults = context_defaults  # provider -> base_url, token_url, sleep, timeouts

    def context(self, org: str, connector: dict[str, Any], provider: ConnectorProvider) -> ProviderContext:
        connector_id = str(connector["connector_id"])
        creds, version = self._creds.load(org, connector_id)
        holder = {"version": version}

        def save(new: dict[str, Any]) -> None:  # an SDK that rotated tokens itself hands them over here
            holder["version"] = self._creds.save(org, connector_id, new, if_version=holder["version"])
            ctx.credentials = new

        account = connector.get("account") or {}
        ctx = ProviderContext(
            credentials=creds,
            auth_type=str(connector.get("auth_type") or "api_token"),
            save_credentials=save,
            account=AccountInfo(
                str(account.get("account_scope", "")), str(account.get("account_name", "")), account.get("details", {})
            ),
            **self._defaults(str(connector["provider"])),
        )
        if ctx.auth_type == "oauth" and oauth_expiring(creds, self._clock.now()):
            self.refresh(org, connector, provider, ctx, stale_version=version)
        return ctx

    def refresh(
        self,
        org: str,
        connector: dict[str, Any],
        provider: ConnectorProvider,
        ctx: ProviderContext,
        *,
        stale_version: int | None = None,
    ) -> None:
        """Rotate ctx's credentials (serialised per connector); RefreshRejected marks needs_reauth."""
        connector_id = str(connector["connector_id"])
        with self._locks.hold(org, lock_pk(connector_id), "refresh", wait_s=REFRESH_LOCK_WAIT_S):
            current, version = self._creds.load(org, connector_id)
            if (
                stale_version is not None
                and version != stale_version
                and not oauth_expiring(current, self._clock.now())
            ):
                ctx.credentials = current  # another caller rotated while we waited: use theirs
                return
            ctx.credentials = current
            try:
                rotated = provider.refresh(ctx)
            except RefreshRejected as exc:
                self._mark_needs_reauth(org, connector_id, str(exc))
                raise
            try:
                self._creds.save(org, connector_id, rotated, if_version=version)
            except ConditionFailed as exc:  # impossible under the lock unless the lease ran out
                raise TransientProviderError("credentials changed during a token refresh; retrying") from exc
            ctx.credentials = rotated
        log.info("connector %s: OAuth tokens rotated", connector_id)
        self._connectors.update(org, connector_id, _clear_reauth)

    def call(
        self,
        org: str,
        connector: dict[str, Any],
        provider: ConnectorProvider,
        ctx: ProviderContext,
        fn: Callable[[], T],
    ) -> T:
        """fn(), and once more after a refresh when an OAuth provider says the access token expired (a token
        revoked before its `expires_at`, or Notion's, which has none: a 401 is the only signal)."""
        try:
            return fn()
        except TokenExpired:
            if ctx.auth_type != "oauth":
                raise
        self.refresh(org, connector, provider, ctx)
        try:
            return fn()
        except TokenExpired as exc:
            raise CredentialsRejected(f"the provider refused the refreshed access token: {exc}") from exc

    def _mark_needs_reauth(self, org: str, connector_id: str, reason: str) -> None:
        now = self._clock.now()

        def mark(d: dict[str, Any]) -> dict[str, Any]:
            return dict(d, needs_reauth=True, needs_reauth_at=iso(now), needs_reauth_reason=reason, last_error=reason)

        self._connectors.update(org, connector_id, mark)


def _clear_reauth(d: dict[str, Any]) -> dict[str, Any] | None:
    if not d.get("needs_reauth"):
        return None
    return dict(d, needs_reauth=False, needs_reauth_at=None, needs_reauth_reason="")
