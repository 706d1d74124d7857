"""KeyService for the console: last-used tracking, an organisation managing only its own keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.access.keys import LAST_USED_RESOLUTION_S, KeyService
from ctxstore.services.access.principal import Principal
from tests.support.app import LocalApp, make_app


class SteppedClock:
    def __init__(self, start: float) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "data")
    yield la
    la.close()


def _info(keys: KeyService, token: str) -> float | None:
    prefix = token.split("_")[1]
    return next(k for k in keys.list() if k.prefix == prefix).last_used_at


def test_last_used_is_recorded_at_most_once_a_minute(local: LocalApp) -> None:
    clock = SteppedClock(1_000_000.0)
    keys = KeyService(local.container.records, clock)  # the clock is a constructor port
    token = keys.create("acme")
    assert _info(keys, token) is None
    keys.authenticate(token)
    assert _info(keys, token) == 1_000_000.0
    clock.t += LAST_USED_RESOLUTION_S - 1
    keys.authenticate(token)
    assert _info(keys, token) == 1_000_000.0  # within the minute: no write
    clock.t += 2
    keys.authenticate(token)
    assert _info(keys, token) == clock.t


def test_revoke_wins_over_a_concurrent_last_used_write(local: LocalApp) -> None:
    keys = local.services.keys
    token = keys.create("acme")
    keys.authenticate(token)  # bumps the record's version
    assert keys.revoke(token.split("_")[1])
    with pytest.raises(ApiError) as err:
        keys.authenticate(token)
    assert err.value.code is ErrorCode.UNAUTHORIZED


def test_an_organisation_lists_creates_and_revokes_only_its_own_keys(local: LocalApp) -> None:
    keys = local.services.keys
    mine = keys.authenticate(keys.create("acme"))
    theirs = keys.create("globex")
    listed = {k.prefix for k in keys.list_for(mine)}
    assert mine.key_prefix in listed and theirs.split("_")[1] not in listed
    with pytest.raises(ApiError) as err:
        keys.revoke_for(mine, theirs.split("_")[1])
    assert err.value.code is ErrorCode.NOT_FOUND
    assert keys.authenticate(theirs).org == "globex"
    new = keys.create_for(mine, expires_in_s=3600, databases=["a", "b"])
    p = keys.authenticate(new)
    assert p.org == "acme" and p.databases == frozenset({"a", "b"})


def test_a_key_limited_to_some_databases_grants_no_wider_access(local: LocalApp) -> None:
    keys = local.services.keys
    limited = Principal("acme", "x" * 12, frozenset({"a"}))
    with pytest.raises(ApiError) as err:
        keys.create_for(limited)
    assert err.value.code is ErrorCode.FORBIDDEN
    with pytest.raises(ApiError) as err:
        keys.create_for(limited, databases=["a", "b"])
    assert err.value.code is ErrorCode.FORBIDDEN
    assert keys.authenticate(keys.create_for(limited, databases=["a"])).databases == frozenset({"a"})


def test_principal_for_a_prefix_follows_revocation_and_expiry(local: LocalApp) -> None:
    clock = SteppedClock(2_000_000.0)
    keys = KeyService(local.container.records, clock)  # the clock is a constructor port
    short = keys.create("acme", expires_in_s=60)
    prefix = short.split("_")[1]
    assert keys.principal_for(prefix).org == "acme"
    clock.t += 61
    with pytest.raises(ApiError):
        keys.principal_for(prefix)
    other = keys.create("acme")
    keys.revoke(other.split("_")[1])
    with pytest.raises(ApiError):
        keys.principal_for(other.split("_")[1])
    with pytest.raises(ApiError):
        keys.principal_for("nosuchprefix")


def test_a_busy_store_does_not_fail_authentication_over_last_used(tmp_path: Path) -> None:
    import sqlite3

    la = make_app(tmp_path / "d", sqlite_busy_timeout_ms=50)
    try:
        token = la.services.keys.create("acme")
        blocker = sqlite3.connect(la.data_dir / "records.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock: the last-used write cannot land
        try:
            assert la.services.keys.authenticate(token).org == "acme"
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert _info(la.services.keys, token) is None
    finally:
        la.close()
