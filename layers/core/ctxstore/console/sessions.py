"""Console sessions: a random token in an HttpOnly cookie, its SHA-256 stored as a record.

The record names the organisation and the API key's public prefix, never the key itself. Every
request re-checks that key (revoked or expired ends the session), so a console session can do no
more, and last no longer, than the key it was opened with.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from ctxstore.ports.clock import Clock
from ctxstore.ports.records import Put, RecordStore
from ctxstore.services import record_kinds as rk

SESSION_KIND = "console_session"
SESSION_LIFETIME_S = 12 * 3600  # absolute: sign in again after a working day
IDLE_TIMEOUT_S = 2 * 3600
_TOUCH_EVERY_S = 300.0  # the idle clock is written at most every 5 minutes


@dataclass(frozen=True)
class Session:
    token_hash: str
    org: str
    key_prefix: str
    csrf_token: str
    created_at: float
    last_seen_at: float


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SessionStore:
    def __init__(self, records: RecordStore, clock: Clock) -> None:
        self._records = records
        self._clock = clock

    def open(self, org: str, key_prefix: str) -> tuple[str, Session]:
        """A new session; returns the cookie token (shown to nobody else) and the session."""
        token = secrets.token_urlsafe(32)
        now = self._clock.now()
        session = Session(_hash(token), org, key_prefix, secrets.token_urlsafe(32), now, now)
        self._records.put(
            rk.SYSTEM_ORG,
            Put(
                SESSION_KIND,
                "",
                session.token_hash,
                {
                    "org": org,
                    "key_prefix": key_prefix,
                    "csrf_token": session.csrf_token,
                    "created_at": now,
                    "last_seen_at": now,
                },
                if_absent=True,
                expires_at=now + SESSION_LIFETIME_S,
            ),
        )
        return token, session

    def find(self, token: str | None) -> Session | None:
        """The live session of a cookie token, or None (unknown, expired or idle too long)."""
        if not token or len(token) > 128:
            return None
        token_hash = _hash(token)
        rec = self._records.get(rk.SYSTEM_ORG, SESSION_KIND, "", token_hash)
        if rec is None or not hmac.compare_digest(rec.sk, token_hash):
            return None
        d = rec.data
        now = self._clock.now()
        if now - float(d["created_at"]) > SESSION_LIFETIME_S or now - float(d["last_seen_at"]) > IDLE_TIMEOUT_S:
            self._records.delete(rk.SYSTEM_ORG, SESSION_KIND, "", token_hash)
            return None
        if now - float(d["last_seen_at"]) > _TOUCH_EVERY_S:
            self._records.put(
                rk.SYSTEM_ORG,
                Put(SESSION_KIND, "", token_hash, dict(d, last_seen_at=now), expires_at=rec.expires_at),
            )
        return Session(
            token_hash, d["org"], d["key_prefix"], d["csrf_token"], float(d["created_at"]), float(d["last_seen_at"])
        )

    def end(self, session: Session) -> None:
        self._records.delete(rk.SYSTEM_ORG, SESSION_KIND, "", session.token_hash)


def same_token(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode(), (given or "").encode())
