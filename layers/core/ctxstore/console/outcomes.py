"""What a successful POST did, kept for the page it redirects to (Post/Redirect/Get).

A form's answer is a 303 to a GET address carrying `outcome=<token>`; that page shows the outcome read back
here. A reload of it reads the same outcome and posts nothing again, and its address answers a GET. Only
what a page shows in the clear is kept (ids, names, counts, warnings): never a secret, which is why the
two answers that show a secret once (a new API key, a webhook signing secret) are not redirected.
Outcomes belong to the session that made them and expire with it.
"""

from __future__ import annotations

import secrets
from typing import Any

from ctxstore.console.sessions import SESSION_LIFETIME_S, Session
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import Put, RecordStore
from ctxstore.services import record_kinds as rk

OUTCOME_KIND = "console_outcome"
OUTCOME_LIFETIME_S = 3600.0
FIELD = "outcome"


class Outcomes:
    def __init__(self, records: RecordStore, clock: Clock) -> None:
        self._records = records
        self._clock = clock

    def keep(self, session: Session, outcome: dict[str, Any]) -> str:
        """Store one outcome; the token its redirect names."""
        token = secrets.token_urlsafe(12)
        now = self._clock.now()
        expires = now + min(OUTCOME_LIFETIME_S, SESSION_LIFETIME_S)
        self._records.put(rk.SYSTEM_ORG, Put(OUTCOME_KIND, session.token_hash, token, outcome, expires_at=expires))
        return token

    def read(self, session: Session, token: str | None) -> dict[str, Any]:
        """The outcome a redirect named, or nothing (unknown, expired, another session's)."""
        if not token or len(token) > 64:
            return {}
        rec = self._records.get(rk.SYSTEM_ORG, OUTCOME_KIND, session.token_hash, token)
        if rec is None or (rec.expires_at is not None and rec.expires_at <= self._clock.now()):
            return {}
        return dict(rec.data)
