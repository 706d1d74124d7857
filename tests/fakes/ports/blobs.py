"""An in-memory BlobStore: whole-object writes, (org, key) addressing, prefix deletes, presigned grants.

Grants are opaque `memory://` URLs recorded with their limits, so a test can check what was granted
(`grants`); nothing serves them. As on S3, a presigned upload allows at most 5 GB and a grant lasts at most 7 days.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from ctxstore.ports.blobs import BlobNotFound, BlobPut, PresignedPost, put_each

MAX_PRESIGNED_POST_BYTES = 5 * 1024**3  # S3: a single upload (PUT or POST) is at most 5 GB
MAX_PRESIGN_SECONDS = 7 * 24 * 3600  # S3 SigV4: presigned URLs last at most 7 days


@dataclass(frozen=True)
class Grant:
    action: str  # "get" | "put"
    org: str
    key: str
    expires_in: int
    max_bytes: int | None = None
    content_type: str | None = None
    filename: str | None = None


class InMemoryBlobStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blobs: dict[tuple[str, str], tuple[bytes, str | None]] = {}
        self.grants: dict[str, Grant] = {}

    def put(self, org: str, key: str, data: bytes, *, content_type: str | None = None) -> None:
        with self._lock:
            self._blobs[(org, key)] = (bytes(data), content_type)

    def put_many(self, org: str, blobs: Sequence[BlobPut]) -> None:
        put_each(self, org, blobs)

    def get(self, org: str, key: str) -> bytes:
        with self._lock:
            found = self._blobs.get((org, key))
        if found is None:
            raise BlobNotFound(key)
        return found[0]

    def exists(self, org: str, key: str) -> bool:
        with self._lock:
            return (org, key) in self._blobs

    def delete(self, org: str, key: str) -> bool:
        with self._lock:
            return self._blobs.pop((org, key), None) is not None

    def delete_prefix(self, org: str, prefix: str) -> int:
        with self._lock:
            doomed = [k for k in self._blobs if k[0] == org and k[1].startswith(prefix)]
            for k in doomed:
                del self._blobs[k]
            return len(doomed)

    def size(self, org: str, key: str) -> int:
        return len(self.get(org, key))

    def content_type(self, org: str, key: str) -> str | None:
        with self._lock:
            found = self._blobs.get((org, key))
        if found is None:
            raise BlobNotFound(key)
        return found[1]

    def _grant(self, grant: Grant) -> str:
        if not 0 < grant.expires_in <= MAX_PRESIGN_SECONDS:
            raise ValueError(f"a presigned grant lasts 1..{MAX_PRESIGN_SECONDS} s, not {grant.expires_in}")
        token = uuid.uuid4().hex
        with self._lock:
            self.grants[token] = grant
        return f"memory://blobs/{token}"

    def presigned_url(self, org: str, key: str, *, expires_in: int, filename: str, content_type: str) -> str:
        return self._grant(Grant("get", org, key, expires_in, content_type=content_type, filename=filename))

    def presigned_post(
        self, org: str, key: str, *, expires_in: int, max_bytes: int, content_type: str | None = None
    ) -> PresignedPost:
        if not 0 < max_bytes <= MAX_PRESIGNED_POST_BYTES:
            raise ValueError(f"a presigned upload allows 1..{MAX_PRESIGNED_POST_BYTES} bytes, not {max_bytes}")
        url = self._grant(Grant("put", org, key, expires_in, max_bytes=max_bytes, content_type=content_type))
        return PresignedPost(url=url, fields={})
