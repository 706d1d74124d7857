"""Organisations and API keys: create, list, revoke, authenticate."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxstore.domain import api_keys
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.ports.records import ConditionFailed, Put
from ctxstore.services import record_kinds as rk
from ctxstore.services.container import Container
from ctxstore.services.principal import Principal

DEFAULT_ORG = "default"
_ORG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


@dataclass(frozen=True)
class KeyInfo:
    prefix: str
    org: str
    created_at: float
    expires_at: float | None
    revoked: bool
    databases: list[str] | None


class KeyService:
    def __init__(self, c: Container) -> None:
        self._c = c

    def ensure_org(self, org: str) -> bool:
        """Create the organisation if missing; True if it was created."""
        if not _ORG_RE.match(org) or org == rk.SYSTEM_ORG:
            raise ValueError(f"invalid organisation id '{org}'")
        try:
            self._c.records.put(
                rk.SYSTEM_ORG, Put(rk.ORG, "", org, {"org": org, "created_at": self._c.clock.now()}, if_absent=True)
            )
            return True
        except ConditionFailed:
            return False

    def has_any_org(self) -> bool:
        return self._c.records.count(rk.SYSTEM_ORG, rk.ORG, "") > 0

    def bootstrap_default(self) -> str | None:
        """On first start (no organisation at all), create `default` and return its first key, once."""
        if self.has_any_org():
            return None
        if not self.ensure_org(DEFAULT_ORG):
            return None
        return self.create(DEFAULT_ORG)

    def create(self, org: str, *, expires_in_s: int | None = None, databases: list[str] | None = None) -> str:
        self.ensure_org(org)
        key = api_keys.generate()
        now = self._c.clock.now()
        self._c.records.put(
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
                },
                if_absent=True,
            ),
        )
        return key.token

    def list(self, org: str | None = None) -> list[KeyInfo]:
        out: list[KeyInfo] = []
        after: str | None = None
        while True:
            page = self._c.records.query(rk.SYSTEM_ORG, rk.API_KEY, "", after=after, limit=500)
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
                        )
                    )
            if page.next_after is None:
                return out
            after = page.next_after

    def revoke(self, prefix: str) -> bool:
        rec = self._c.records.get(rk.SYSTEM_ORG, rk.API_KEY, "", prefix)
        if rec is None:
            return False
        data = dict(rec.data, revoked=True, revoked_at=self._c.clock.now())
        self._c.records.put(rk.SYSTEM_ORG, Put(rk.API_KEY, "", prefix, data, if_version=rec.version))
        return True

    def authenticate(self, token: str) -> Principal:
        """The principal of a valid key; ApiError UNAUTHORIZED otherwise (the route maps BYOG to 403)."""
        parts = api_keys.split(token)
        if parts is None:
            raise ApiError(ErrorCode.UNAUTHORIZED, "malformed API key")
        prefix, secret = parts
        rec = self._c.records.get(rk.SYSTEM_ORG, rk.API_KEY, "", prefix)
        # Hash even when the prefix is unknown, so timing does not reveal which prefixes exist.
        stored = rec.data["hash"] if rec else "0" * 64
        ok = api_keys.matches(secret, stored)
        if rec is None or not ok:
            raise ApiError(ErrorCode.UNAUTHORIZED, "invalid API key")
        if rec.data.get("revoked"):
            raise ApiError(ErrorCode.UNAUTHORIZED, "API key has been revoked")
        expires_at = rec.data.get("expires_at")
        if expires_at is not None and expires_at <= self._c.clock.now():
            raise ApiError(ErrorCode.UNAUTHORIZED, "API key has expired")
        dbs = rec.data.get("databases")
        return Principal(org=rec.data["org"], key_prefix=prefix, databases=frozenset(dbs) if dbs is not None else None)
