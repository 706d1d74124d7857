"""Blobs: uploaded originals, addressed by (org, key). Writes are atomic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class BlobNotFound(Exception):
    pass


@dataclass(frozen=True)
class PresignedPost:
    """An upload grant: the client POSTs multipart/form-data to `url` with `fields` first, then the file part."""

    url: str
    fields: dict[str, str] = field(default_factory=dict)
    file_field: str = "file"


@dataclass(frozen=True)
class BlobPut:
    key: str
    data: bytes
    content_type: str | None = None


def put_each(store: BlobStore, org: str, blobs: Sequence[BlobPut]) -> None:
    """put_many for a store whose writes cannot share a sync: one put per blob, in order."""
    for blob in blobs:
        store.put(org, blob.key, blob.data, content_type=blob.content_type)


class BlobStore(Protocol):
    def put(self, org: str, key: str, data: bytes, *, content_type: str | None = None) -> None: ...

    def put_many(self, org: str, blobs: Sequence[BlobPut]) -> None:
        """put() for several blobs, each durable when this returns (their syncs batched where the store allows)."""
        ...

    def get(self, org: str, key: str) -> bytes:
        """Raises BlobNotFound."""
        ...

    def exists(self, org: str, key: str) -> bool: ...

    def delete(self, org: str, key: str) -> bool: ...

    def delete_prefix(self, org: str, prefix: str) -> int: ...

    def size(self, org: str, key: str) -> int:
        """Raises BlobNotFound."""
        ...

    def presigned_url(self, org: str, key: str, *, expires_in: int, filename: str, content_type: str) -> str:
        """A time-limited download URL (absolute, or a path on this server for the local backend)."""
        ...

    def presigned_post(
        self, org: str, key: str, *, expires_in: int, max_bytes: int, content_type: str | None = None
    ) -> PresignedPost:
        """A time-limited grant to upload one object of 1..max_bytes bytes to exactly this key."""
        ...
