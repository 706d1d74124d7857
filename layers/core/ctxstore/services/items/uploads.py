"""Large uploads: a file goes straight to blob storage under a presigned POST, then is ingested by reference.

A Lambda request body is capped at 6 MB; the spec accepts 50 MB files. `create` hands out an upload
grant for one staged object (S3 enforces the size in the POST policy; the local server checks it
itself); `resolve` turns `{upload_id, filename}` references back into the same `Upload` values a
multipart file part gives, so every ingest rule (format, 50 MB, scope, metadata) runs unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.ingest_request import MAX_FILE_BYTES, Upload
from ctxstore.ports.blobs import BlobNotFound, BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import Put, RecordStore
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal

UPLOAD_TTL_SECONDS = 900  # how long the grant is valid
STAGED_TTL_SECONDS = 24 * 3600  # how long a received, un-ingested file is kept (S3: lifecycle rule)
MAX_REFS = 100
MAX_FILENAME = 1024


def staged_key(upload_id: str) -> str:
    return f"{rk.UPLOAD_PREFIX}{upload_id}"


def _filename(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{where} must be a non-empty string")
    if len(value) > MAX_FILENAME:
        raise invalid(f"{where} is longer than {MAX_FILENAME} characters")
    return value


class UploadGrant(TypedDict):
    """`POST /context/uploads`: where and how the client sends the file (a presigned POST)."""

    upload_id: str
    method: Literal["POST"]
    url: str
    fields: dict[str, str]
    file_field: str
    expires_at: float
    max_bytes: int


class UploadService:
    def __init__(self, records: RecordStore, clock: Clock, blobs: Callable[[], BlobStore]) -> None:
        """`blobs`: a provider, read per call (built with the ingest service, which most ingests use without it)."""
        self._records = records
        self._clock = clock
        self._blobs = blobs

    def create(self, principal: Principal, body: dict[str, Any]) -> UploadGrant:
        unknown = sorted(set(body) - {"filename", "size_bytes", "content_type"})
        if unknown:
            raise invalid(f"unknown field '{unknown[0]}'")
        filename = _filename(body.get("filename"), "'filename'")
        size = body.get("size_bytes")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise invalid("'size_bytes' must be a positive integer")
            if size > MAX_FILE_BYTES:
                raise ApiError(
                    ErrorCode.PAYLOAD_TOO_LARGE, f"file '{filename}' is {size} bytes; the limit is 50 MB per file"
                )
        ctype = body.get("content_type")
        if ctype is not None and (not isinstance(ctype, str) or len(ctype) > 255 or "\n" in ctype):
            raise invalid("'content_type' must be a media type string")
        upload_id = uuid.uuid4().hex
        now = self._clock.now()
        grant = self._blobs().presigned_post(
            principal.org,
            staged_key(upload_id),
            expires_in=UPLOAD_TTL_SECONDS,
            max_bytes=MAX_FILE_BYTES,
            content_type=ctype or None,
        )
        record = {"filename": filename, "content_type": ctype or None, "created_at": now}
        self._records.put(
            principal.org,
            Put(rk.UPLOAD, "", upload_id, record, if_absent=True, expires_at=now + STAGED_TTL_SECONDS),
        )
        return {
            "upload_id": upload_id,
            "method": "POST",
            "url": grant.url,
            "fields": grant.fields,
            "file_field": grant.file_field,
            "expires_at": now + UPLOAD_TTL_SECONDS,
            "max_bytes": MAX_FILE_BYTES,
        }

    def resolve(self, principal: Principal, raw: list[Any]) -> list[Upload]:
        """The referenced files, size-checked before they are read; another org's ids are unknown here."""
        if len(raw) > MAX_REFS:
            raise invalid(f"'uploads' holds {len(raw)} references; the limit is {MAX_REFS}")
        out: list[Upload] = []
        seen: set[str] = set()
        for i, ref in enumerate(raw):
            where = f"uploads[{i}]"
            if not isinstance(ref, dict):
                raise invalid(f"{where} must be an object with 'upload_id' and optionally 'filename'")
            unknown = sorted(set(ref) - {"upload_id", "filename"})
            if unknown:
                raise invalid(f"{where}: unknown key '{unknown[0]}'")
            upload_id = ref.get("upload_id")
            if not isinstance(upload_id, str) or not upload_id:
                raise invalid(f"{where}.upload_id must be a non-empty string")
            if upload_id in seen:
                raise invalid(f"{where}.upload_id '{upload_id}' is listed twice")
            seen.add(upload_id)
            rec = self._records.get(principal.org, rk.UPLOAD, "", upload_id)
            if rec is None:
                raise ApiError(ErrorCode.NOT_FOUND, f"{where}: no upload '{upload_id}' (unknown or expired)")
            filename = _filename(ref["filename"], f"{where}.filename") if "filename" in ref else rec.data["filename"]
            try:
                size = self._blobs().size(principal.org, staged_key(upload_id))
            except BlobNotFound:
                raise invalid(f"{where}: upload '{upload_id}' has not been received yet") from None
            if size > MAX_FILE_BYTES:  # S3's policy already refuses these; checked again, before reading
                raise ApiError(
                    ErrorCode.PAYLOAD_TOO_LARGE, f"file '{filename}' is {size} bytes; the limit is 50 MB per file"
                )
            data = self._blobs().get(principal.org, staged_key(upload_id))
            out.append(Upload(filename=str(filename), content_type=rec.data.get("content_type"), data=data))
        return out

    def release(self, principal: Principal, upload_ids: list[str]) -> None:
        """After the items were stored under their own keys: the staged copies are no longer needed."""
        for upload_id in upload_ids:
            self._blobs().delete(principal.org, staged_key(upload_id))
            self._records.delete(principal.org, rk.UPLOAD, "", upload_id)
