"""Contract of the CredentialVault port: sealed values are opaque text, open only for their (org, owner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.ports.credential_vault import VaultError
from tests.contract.store_factories import VAULTS

SECRET = b'{"access_token":"xoxb-secret-token","refresh_token":"r-123"}'


@pytest.fixture(params=sorted(VAULTS))
def vault(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    adapter, close = VAULTS[request.param](tmp_path)
    yield adapter
    close()


def test_seal_open_roundtrip_and_opaque_text(vault: Any) -> None:
    sealed = vault.seal("o1", "conn-1", SECRET)
    assert isinstance(sealed, str) and sealed.isprintable()
    assert b"xoxb" not in sealed.encode() and "xoxb" not in sealed
    assert vault.open("o1", "conn-1", sealed) == SECRET
    assert vault.seal("o1", "conn-1", SECRET) != sealed  # a fresh nonce each time


def test_a_value_opens_only_for_its_org_and_owner(vault: Any) -> None:
    sealed = vault.seal("o1", "conn-1", SECRET)
    for org, owner in (("o1", "conn-2"), ("o2", "conn-1"), ("o1conn-1", ""), ("o1\x1fconn", "1")):
        with pytest.raises(VaultError):
            vault.open(org, owner, sealed)


def test_tampered_or_foreign_values_do_not_open(vault: Any) -> None:
    sealed = vault.seal("o1", "conn-1", SECRET)
    prefix = sealed.partition(":")[0]
    for bad in ("", "nonsense", "v0:abc", prefix + ":", prefix + ":!!!not base64!!!", sealed[:-8]):
        with pytest.raises(VaultError):
            vault.open("o1", "conn-1", bad)
    flipped = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    with pytest.raises(VaultError):
        vault.open("o1", "conn-1", flipped)


def test_survives_reopen(tmp_path: Path) -> None:
    for name, factory in VAULTS.items():
        folder = tmp_path / name
        folder.mkdir()
        v, close = factory(folder)
        sealed = v.seal("o", "c", SECRET)
        close()
        v2, close2 = factory(folder)
        assert v2.open("o", "c", sealed) == SECRET
        close2()
