"""Contract of the BlobStore port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.ports.blobs import BlobNotFound
from tests.contract.store_factories import BLOB_STORES


@pytest.fixture(params=sorted(BLOB_STORES))
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    adapter, close = BLOB_STORES[request.param](tmp_path)
    yield adapter
    close()


def test_roundtrip_overwrite_size(blobs: Any) -> None:
    blobs.put("o", "db/col/item/original", b"hello")
    assert blobs.get("o", "db/col/item/original") == b"hello"
    assert blobs.exists("o", "db/col/item/original")
    blobs.put("o", "db/col/item/original", b"bye!!!")
    assert blobs.get("o", "db/col/item/original") == b"bye!!!"
    assert blobs.size("o", "db/col/item/original") == 6


def test_missing(blobs: Any) -> None:
    with pytest.raises(BlobNotFound):
        blobs.get("o", "nope")
    with pytest.raises(BlobNotFound):
        blobs.size("o", "nope")
    assert not blobs.exists("o", "nope")
    assert blobs.delete("o", "nope") is False


def test_orgs_isolated_and_hostile_keys_stay_inside(blobs: Any) -> None:
    blobs.put("o1", "db/a", b"1")
    with pytest.raises(BlobNotFound):
        blobs.get("o2", "db/a")
    hostile = "db/../../../etc/passwd"
    blobs.put("o1", hostile, b"x")
    assert blobs.get("o1", hostile) == b"x"
    assert blobs.get("o1", "db/a") == b"1"
    blobs.put("o1", "db/ünï cødé/?#%", b"u")
    assert blobs.get("o1", "db/ünï cødé/?#%") == b"u"


def test_large_binary(blobs: Any) -> None:
    data = bytes(range(256)) * 40_000  # ~10 MB
    blobs.put("o", "db/c/big", data)
    assert blobs.get("o", "db/c/big") == data


def test_delete_and_delete_prefix(blobs: Any) -> None:
    for k in ["db/c1/a", "db/c1/b", "db/c2/a", "db2/c1/a"]:
        blobs.put("o", k, b"x")
    assert blobs.delete("o", "db/c1/a") is True
    assert blobs.delete_prefix("o", "db/c1/") == 1
    assert not blobs.exists("o", "db/c1/b")
    assert blobs.exists("o", "db/c2/a")
    assert blobs.delete_prefix("o", "db/") == 1
    assert blobs.exists("o", "db2/c1/a")
