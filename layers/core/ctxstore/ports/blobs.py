"""Blobs: uploaded originals, addressed by (org, key). Writes are atomic."""

from __future__ import annotations

from typing import Protocol


class BlobNotFound(Exception):
    pass


class BlobStore(Protocol):
    def put(self, org: str, key: str, data: bytes, *, content_type: str | None = None) -> None: ...

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
