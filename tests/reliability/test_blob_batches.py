"""FsBlobStore.put_many on a disk that fills part-way, for real (a 1 MB tmpfs): the call answers StoreUnavailable,
no blob of the call and no temporary file is left, and what was stored before is intact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxstore.adapters.local.fs_blobs import FsBlobStore
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.blobs import BlobPut
from tests.support.tmpfs import mounted_tmpfs


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "tiny", "1m") as mnt:
        yield mnt


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_a_batch_that_fills_the_disk_leaves_nothing_and_keeps_what_was_there(tiny_disk: Path) -> None:
    store = FsBlobStore(tiny_disk / "blobs")
    store.put("o", "db/kept/v1", b"k" * 300_000)
    batch = [BlobPut(f"db/item-{i}/v1", bytes([i]) * 250_000) for i in range(4)]  # 1 MB: cannot all fit
    with pytest.raises(StoreUnavailable):
        store.put_many("o", batch)
    assert _files(tiny_disk / "blobs") == ["o/db/kept/v1"]
    assert store.get("o", "db/kept/v1") == b"k" * 300_000
    store.put_many("o", batch[:2])  # room for two: both stored whole
    assert [store.get("o", b.key) for b in batch[:2]] == [b.data for b in batch[:2]]


def test_put_many_stores_every_blob_and_the_last_copy_of_a_key_wins(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs")
    store.put_many("o", [BlobPut("a/v1", b"one"), BlobPut("b/v1", b"two", "text/plain"), BlobPut("a/v1", b"three")])
    assert store.get("o", "a/v1") == b"three" and store.get("o", "b/v1") == b"two"
    assert not [p for p in (tmp_path / "blobs").rglob(".tmp-*")]
    store.put_many("o", [])
