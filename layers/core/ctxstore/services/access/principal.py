"""Who is calling: the organisation a key belongs to and what that key may touch."""

from __future__ import annotations

from dataclasses import dataclass

from ctxstore.domain.errors import ApiError, ErrorCode


@dataclass(frozen=True)
class Principal:
    org: str
    key_prefix: str
    databases: frozenset[str] | None = None  # None: every database of the organisation

    def check_database(self, database: str) -> None:
        if self.databases is not None and database not in self.databases:
            raise ApiError(ErrorCode.FORBIDDEN, f"this API key has no access to database '{database}'")
