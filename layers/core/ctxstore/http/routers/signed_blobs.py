"""GET /blobs/{token}: downloads behind the time-limited signed URLs of `inspect` (local backend).

The token is the credential, so this route takes no API key; on AWS the URL
is an S3 presigned URL instead and this route is not deployed.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ctxstore.domain.errors import ApiError, ErrorCode

router = APIRouter(tags=["context"])


@router.get("/blobs/{token}")
def download(token: str, request: Request) -> Response:
    blobs = request.app.state.services.container.blobs
    verify = getattr(blobs, "verify_presigned", None)
    if verify is None:
        raise ApiError(ErrorCode.NOT_FOUND, "signed downloads are served by the storage service here")
    grant = verify(token, now=request.app.state.services.container.clock.now())
    if grant is None:
        raise ApiError(ErrorCode.FORBIDDEN, "the link is invalid or has expired")
    org, key, filename, content_type = grant
    data = blobs.get(org, key)
    safe_name = filename.replace('"', "").replace("\r", "").replace("\n", "")
    return Response(
        data, media_type=content_type, headers={"Content-Disposition": f'attachment; filename="{safe_name}"'}
    )
