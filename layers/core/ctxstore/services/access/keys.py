"""Organisations and API keys: create, list, revoke, authenticate."""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

from ctxstore.domain import api_keys
from ctxstore.domain.errors import ApiError, ErrorCode, StoreUnavailable
from ctxstore.domain.scopes import validate_database_name
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import ConditionFailed, Put, Record, RecordStore
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal

DEFAULT_ORG = "default"
# last_used_at is written at most this often per key: one record write per minute, not one per request.
LAST_USED_RESOLUTION_S = 60.0
_ORG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


@dataclass(frozen=True)
class KeyInfo:
    prefix: str
    org: str
    created_at: float
    expires_at: float | None
    revoked: bool
    databases: list[str] | None
    last_used_at: float | None = None
    name: str = ""  # what the key is for, as its creator called it (keys made before names have none)


MAX_KEY_NAME = 80


def key_name(value: str | None) -> str:
    """A key's name: optional, at most 80 printable characters (it is shown, never used to authenticate)."""
    name = (value or "").strip()
    if len(name) > MAX_KEY_NAME or any(not c.isprintable() for c in name):
        raise ApiError(ErrorCode.INVALID_INPUT, f"a key's name is at most {MAX_KEY_NAME} printable characters")
    return name


class KeyService:
    def __init__(self, records: RecordStore, clock: Clock) -> None:
        self._records = records
        self._clock = clock

    def ensure_org(self, org: str) -> bool:
        """Create the organisation if missing; True if it was created."""
        if not _ORG_RE.match(org) or org == rk.SYSTEM_ORG:
            raise ValueError(f"invalid organisation id '{org}'")
        try:
            self._records.put(
                rk.SYSTEM_ORG, Put(rk.ORG, "", org, {"org": org, "created_at": self._clock.now()}, if_absent=True)
            )
            return True
        except ConditionFailed:
            return False

    def has_any_org(self) -> bool:
        return self._records.count(rk.SYSTEM_ORG, rk.ORG, "") > 0

    def bootstrap_default(self) -> str | None:
        """On first start (no organisation at all), create `default` and return its first key, once."""
        if self.has_any_org():
            return None
        if not self.ensure_org(DEFAULT_ORG):
            return None
        return self.create(DEFAULT_ORG)

    def create(
        self, org: str, *, expires_in_s: int | None = None, databases: list[str] | None = None, name: str = ""
    ) -> str:
        self.ensure_org(org)
        key = api_keys.generate()
        now = self._clock.now()
        self._records.put(
            rk.SYSTEM_ORG,
            Put(
                rk.API_KEY,
                "",
                key.prefix,
                {
                    "org": org,
                    "hash": api_keys.hash_secret(key.secret),
                    "created_at": now,
                    "expires_at": now + expires_in_s if expires_in_s else None,
                    "revoked": False,
                    "databases": databases,
                    **({"name": key_name(name)} if name else {}),
                },
                if_absent=True,
            ),
        )
        return key.token

    def list(self, org: str | None = None) -> list[KeyInfo]:
        out: list[KeyInfo] = []
        after: str | None = None
        while True:
            page = self._records.query(rk.SYSTEM_ORG, rk.API_KEY, "", after=after, limit=500)
            for r in page.records:
                d = r.data
                if org is None or d["org"] == org:
                    out.append(
                        KeyInfo(
                            r.sk,
                            d["org"],
                            d["created_at"],
                            d.get("expires_at"),
                            bool(d.get("revoked")),
                            d.get("databases"),
                            d.get("last_used_at"),
                            str(d.get("name") or ""),
                        )
                    )
            if page.next_after is None:
                return out
            after = page.next_after

    def revoke(self, prefix: str) -> bool:
        while True:  # a last-used write may land between the read and the write: read again
            rec = self._records.get(rk.SYSTEM_ORG, rk.API_KEY, "", prefix)
            if rec is None:
                return False
            data = dict(rec.data, revoked=True, revoked_at=self._clock.now())
            try:
                self._records.put(rk.SYSTEM_ORG, Put(rk.API_KEY, "", prefix, data, if_version=rec.version))
                return True
            except ConditionFailed:
                continue

    # ---- an organisation managing its own keys (the console) ------------------------------
    def list_for(self, principal: Principal) -> builtins.list[KeyInfo]:
        """The caller's organisation's keys, newest first."""
        return sorted(self.list(principal.org), key=lambda k: -k.created_at)

    def create_for(
        self,
        principal: Principal,
        *,
        expires_in_s: int | None = None,
        databases: builtins.list[str] | None = None,
        name: str = "",
    ) -> str:
        """A new key of the caller's organisation. A key limited to some databases gives no wider access."""
        if expires_in_s is not None and expires_in_s <= 0:
            raise ApiError(ErrorCode.INVALID_INPUT, "the expiry must be in the future")
        if databases is not None:
            for db in databases:
                validate_database_name(db)
                principal.check_database(db)
        elif principal.databases is not None:
            raise ApiError(
                ErrorCode.FORBIDDEN, "this API key is limited to some databases; a new key must name a subset of them"
            )
        return self.create(principal.org, expires_in_s=expires_in_s, databases=databases, name=key_name(name))

    def revoke_for(self, principal: Principal, prefix: str) -> None:
        """Revoke one of the caller's organisation's keys; another organisation's prefix is not found."""
        rec = self._records.get(rk.SYSTEM_ORG, rk.API_KEY, "", prefix)
        if rec is None or rec.data.get("org") != principal.org:
            raise ApiError(ErrorCode.NOT_FOUND, f"no API key with prefix '{prefix}'")
        if principal.databases is not None and prefix != principal.key_prefix:
            raise ApiError(ErrorCode.FORBIDDEN, "a key limited to some databases may revoke only itself")
        self.revoke(prefix)

    def principal_for(self, prefix: str) -> Principal:
        """The principal of a key known by its prefix (a console session), while the key is still valid."""
        rec = self._records.get(rk.SYSTEM_ORG, rk.API_KEY, "", prefix)
        if rec is None:
            raise ApiError(ErrorCode.UNAUTHORIZED, "invalid API key")
        return self._valid(prefix, rec)

    def authenticate(self, token: str) -> Principal:
        """The principal of a valid key; ApiError UNAUTHORIZED otherwise (the route maps BYOG to 403)."""
        parts = api_keys.split(token)
        if parts is None:
            raise ApiError(ErrorCode.UNAUTHORIZED, "malformed API key")
        prefix, secret = parts
        rec = self._records.get(rk.SYSTEM_ORG, rk.API_KEY, "", prefix)
        # Hash even when the prefix is unknown, so timing does not reveal which prefixes exist.
        stored = rec.data["hash"] if rec else "0" * 64
        ok = api_keys.matches(secret, stored)
        if rec is None or not ok:
            raise ApiError(ErrorCode.UNAUTHORIZED, "invalid API key")
        principal = self._valid(prefix, rec)
        self._touch(rec)
        return principal

    def _valid(self, prefix: str, rec: Record) -> Principal:
        if rec.data.get("revoked"):
            raise ApiError(ErrorCode.UNAUTHORIZED, "API key has been revoked")
        expires_at = rec.data.get("expires_at")
        if expires_at is not None and expires_at <= self._clock.now():
            raise ApiError(ErrorCode.UNAUTHORIZED, "API key has expired")
        dbs = rec.data.get("databases")
        return Principal(org=rec.data["org"], key_prefix=prefix, databases=frozenset(dbs) if dbs is not None else None)

    def _touch(self, rec: Record) -> None:
        """Record when the key was last used, at most once a minute. Best effort: a lost race or a busy store
        skips one update and never fails the request it rides on."""
        now = self._clock.now()
        if now - float(rec.data.get("last_used_at") or 0) < LAST_USED_RESOLUTION_S:
            return
        try:
            self._records.put(
                rk.SYSTEM_ORG, Put(rk.API_KEY, "", rec.sk, dict(rec.data, last_used_at=now), if_version=rec.version)
            )
        except (ConditionFailed, StoreUnavailable):
            pass
