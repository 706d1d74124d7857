"""BlobStore on S3: object key ``f"{org}/{key}"``, server-side encryption on every put.

S3 keys are opaque strings, so hostile keys (``../``, ``?``, ``#``, non-ASCII) are stored literally and
cannot reach another organisation's prefix: org ids never contain ``/``. A PutObject is atomic (readers
see the old or the new object, never a part). Deletes report whether an object existed by asking
HeadObject first, since S3's DeleteObject answers the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from botocore.exceptions import ClientError

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws._common import error_code, http_status
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.adapters.aws.faults import transient, unavailable
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.blobs import BlobNotFound, BlobPut, PresignedPost, put_each

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_MISSING = {"NoSuchKey", "404", "NotFound"}
_DELETE_BATCH = 1000  # DeleteObjects limit
_RETRYABLE_DELETE = {"SlowDown", "InternalError", "ServiceUnavailable"}  # per-key errors a retry can clear
# Objects uploaded under a presigned POST carry this tag; the bucket's lifecycle rule expires them after a
# day, so a file that was never ingested does not stay (ingestion copies it to the item's own key).
STAGED_TAG = ("ctxstore-staged", "true")
_STAGED_TAGGING = (
    f"<Tagging><TagSet><Tag><Key>{STAGED_TAG[0]}</Key><Value>{STAGED_TAG[1]}</Value></Tag></TagSet></Tagging>"
)


class S3BlobStore:
    def __init__(
        self,
        bucket: str,
        *,
        client: S3Client | None = None,
        sse: str = "AES256",
        kms_key_id: str | None = None,
    ) -> None:
        if not bucket:
            raise ValueError("an S3 bucket name is required (CTXSTORE_BLOB_BUCKET)")
        if "/" in bucket:
            raise ValueError("bucket must be a bucket name, not a path")
        self._bucket = bucket
        self._s3: S3Client = map_faults(client or make_client("s3"))  # throttles/5xx -> E6001
        self._sse = sse
        self._kms_key_id = kms_key_id

    @staticmethod
    def _key(org: str, key: str) -> str:
        if not org or "/" in org:
            raise ValueError(f"invalid organisation id for a blob key: {org!r}")
        return f"{org}/{key}"

    @staticmethod
    def _missing(exc: ClientError) -> bool:
        return error_code(exc) in _MISSING or http_status(exc) == 404

    def put(self, org: str, key: str, data: bytes, *, content_type: str | None = None) -> None:
        args: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": self._key(org, key),
            "Body": data,
            "ServerSideEncryption": self._sse,
        }
        if self._sse == "aws:kms" and self._kms_key_id:
            args["SSEKMSKeyId"] = self._kms_key_id
        if content_type:
            args["ContentType"] = content_type
        self._s3.put_object(**args)

    def put_many(self, org: str, blobs: Sequence[BlobPut]) -> None:
        put_each(self, org, blobs)

    def get(self, org: str, key: str) -> bytes:
        try:
            resp = self._s3.get_object(Bucket=self._bucket, Key=self._key(org, key))
        except ClientError as exc:
            if self._missing(exc):
                raise BlobNotFound(key) from None
            raise
        try:  # the body streams after the call returned: a reset or read timeout here is transient too
            body: bytes = resp["Body"].read()
        except Exception as exc:
            if transient(exc):
                raise unavailable("s3", "GetObject", exc) from exc
            raise
        return body

    def _head(self, org: str, key: str) -> dict[str, Any] | None:
        try:
            resp = self._s3.head_object(Bucket=self._bucket, Key=self._key(org, key))
        except ClientError as exc:
            if self._missing(exc):
                return None
            raise
        return dict(resp)

    def exists(self, org: str, key: str) -> bool:
        return self._head(org, key) is not None

    def size(self, org: str, key: str) -> int:
        head = self._head(org, key)
        if head is None:
            raise BlobNotFound(key)
        return int(head["ContentLength"])

    def delete(self, org: str, key: str) -> bool:
        if self._head(org, key) is None:
            return False
        self._s3.delete_object(Bucket=self._bucket, Key=self._key(org, key))
        return True

    def delete_prefix(self, org: str, prefix: str) -> int:
        """Delete every object under ``org/prefix``: ListObjectsV2 pages of 1000, one DeleteObjects each."""
        full = self._key(org, prefix)
        removed = 0
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": self._bucket, "Prefix": full, "MaxKeys": _DELETE_BATCH}
            if token:
                args["ContinuationToken"] = token
            resp = self._s3.list_objects_v2(**args)
            keys = [{"Key": obj["Key"]} for obj in resp.get("Contents", [])]
            if keys:
                out = self._s3.delete_objects(Bucket=self._bucket, Delete={"Objects": keys, "Quiet": False})  # type: ignore[typeddict-item]
                errors = out.get("Errors", [])
                if errors and all(e.get("Code") in _RETRYABLE_DELETE for e in errors):
                    raise StoreUnavailable(f"S3 DeleteObjects: {len(errors)} keys throttled or failed; retry")
                if errors:
                    first = errors[0]
                    detail = f"{first.get('Code')} {first.get('Key')}"
                    raise RuntimeError(f"S3 refused to delete {len(errors)} objects: {detail}")
                removed += len(out.get("Deleted", []))
            if not resp.get("IsTruncated"):
                return removed
            token = resp.get("NextContinuationToken")

    def presigned_url(self, org: str, key: str, *, expires_in: int, filename: str, content_type: str) -> str:
        """A SigV4 presigned GET URL; S3 answers it with this filename and content type. No network call."""
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": self._key(org, key)}
        if filename:
            params["ResponseContentDisposition"] = f"attachment; filename*=UTF-8''{quote(filename, safe='')}"
        if content_type:
            params["ResponseContentType"] = content_type
        url: str = self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=int(expires_in))
        return url

    def presigned_get_url(self, org: str, key: str, expires_in: int = 900) -> str:
        """A time-limited HTTPS GET URL for one existing blob (``inspect`` in url mode); raises BlobNotFound."""
        if not self.exists(org, key):
            raise BlobNotFound(key)
        return self.presigned_url(org, key, expires_in=expires_in, filename="", content_type="")

    def presigned_post(
        self, org: str, key: str, *, expires_in: int, max_bytes: int, content_type: str | None = None
    ) -> PresignedPost:
        """A SigV4 presigned POST whose policy pins the key, the encryption and 1..max_bytes bytes.

        A presigned PUT cannot bound the size; S3 enforces a POST policy's content-length-range itself
        (EntityTooLarge/EntityTooSmall), so the file never passes through API Gateway or Lambda.
        """
        fields: dict[str, str] = {"x-amz-server-side-encryption": self._sse, "tagging": _STAGED_TAGGING}
        conditions: list[Any] = [
            {"x-amz-server-side-encryption": self._sse},
            {"tagging": _STAGED_TAGGING},
            ["content-length-range", 1, int(max_bytes)],
        ]
        if self._sse == "aws:kms" and self._kms_key_id:
            fields["x-amz-server-side-encryption-aws-kms-key-id"] = self._kms_key_id
            conditions.append({"x-amz-server-side-encryption-aws-kms-key-id": self._kms_key_id})
        if content_type:
            fields["Content-Type"] = content_type
            conditions.append({"Content-Type": content_type})
        post = self._s3.generate_presigned_post(
            self._bucket, self._key(org, key), Fields=fields, Conditions=conditions, ExpiresIn=int(expires_in)
        )
        return PresignedPost(url=str(post["url"]), fields={k: str(v) for k, v in post["fields"].items()})
