"""One-time form tokens, for forms whose answer must not happen twice (a new API key, shown once).

The form carries a random token; its first POST claims it (a conditional write, so two racing posts
cannot both win) and a reload that posts it again finds it claimed and does nothing but say what the
first post did. Nothing secret is kept: what a claim remembers is the created key's public prefix.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from ctxstore.console.sessions import SESSION_LIFETIME_S, Session
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import ConditionFailed, Put, RecordStore
from ctxstore.services import record_kinds as rk

FORM_KIND = "console_form"
FIELD = "form_token"


def _sk(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class OneTimeForms:
    def __init__(self, records: RecordStore, clock: Clock) -> None:
        self._records = records
        self._clock = clock

    @staticmethod
    def issue() -> str:
        return secrets.token_urlsafe(24)

    def claim(self, session: Session, token: str) -> dict[str, Any] | None:
        """None on the token's first use (it is claimed now); else what its first use recorded."""
        if not token or len(token) > 128:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, "the form carries no one-time token; reload the page")
        now = self._clock.now()
        try:
            self._records.put(
                rk.SYSTEM_ORG,
                Put(
                    FORM_KIND,
                    session.token_hash,
                    _sk(token),
                    {"claimed_at": now},
                    if_absent=True,
                    expires_at=now + SESSION_LIFETIME_S,  # a token outlives no session
                ),
            )
            return None
        except ConditionFailed:
            rec = self._records.get(rk.SYSTEM_ORG, FORM_KIND, session.token_hash, _sk(token))
            return dict(rec.data) if rec is not None else {}

    def record(self, session: Session, token: str, outcome: dict[str, Any]) -> None:
        """What the claimed post did, for a repeat to report."""
        now = self._clock.now()
        data = {"claimed_at": now, **outcome}
        self._records.put(
            rk.SYSTEM_ORG,
            Put(FORM_KIND, session.token_hash, _sk(token), data, expires_at=now + SESSION_LIFETIME_S),
        )

    def release(self, session: Session, token: str) -> None:
        """A refused post changed nothing: the same form may be sent again once corrected."""
        self._records.delete(rk.SYSTEM_ORG, FORM_KIND, session.token_hash, _sk(token))
