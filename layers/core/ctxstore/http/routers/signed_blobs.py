"""GET /blobs/{token}: downloads behind the signed URLs of `inspect`; POST /blobs/{token}: large uploads (local).

The token is the credential, so this route takes no API key; on AWS the URL
is an S3 presigned URL instead and this route is not deployed.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ctxstore.domain.errors import ApiError, ErrorCode, invalid

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


@router.post("/blobs/{token}", status_code=204)
async def upload(token: str, request: Request) -> Response:
    """The local stand-in for an S3 presigned POST (`POST /context/uploads`): one `file` part, size-capped."""
    blobs = request.app.state.services.container.blobs
    verify = getattr(blobs, "verify_upload", None)
    if verify is None:
        raise ApiError(ErrorCode.NOT_FOUND, "uploads go to the storage service here")
    grant = verify(token, now=request.app.state.services.container.clock.now())
    if grant is None:
        raise ApiError(ErrorCode.FORBIDDEN, "the upload link is invalid or has expired")
    org, key, max_bytes, content_type = grant
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise invalid("send the file as multipart/form-data with one 'file' part")
    form = await request.form()
    part = form.get("file")
    if not isinstance(part, UploadFile):
        raise invalid("'file' must be a file part")
    size = part.size or 0
    if size > max_bytes:  # S3 refuses the same upload with EntityTooLarge (the policy's content-length-range)
        raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE, f"the file is {size} bytes; this upload allows {max_bytes}")
    if size == 0:
        raise invalid("the file is empty")
    data = await part.read()
    await run_in_threadpool(blobs.put, org, key, data, content_type=content_type or part.content_type)
    return Response(status_code=204)
