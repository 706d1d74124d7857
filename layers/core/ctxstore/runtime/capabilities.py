"""What a backend can do, decided once here: services, the HTTP app and the console read these capabilities and
never test the backend themselves (tests/unit/test_settings.py fails on a `backend ==` outside ctxstore.runtime)."""

from __future__ import annotations

from ctxstore.config import Settings
from ctxstore.services.container import Capabilities

# Lambda takes at most 6 MB per request, and an HTTP API hands it a file's bytes base64-encoded (4/3 as
# many): past 4 MiB a console upload on AWS goes to S3 by reference (POST /context/uploads' grant).
AWS_INLINE_UPLOAD_MAX_BYTES = 4 * 1024 * 1024


def capabilities_of(settings: Settings) -> Capabilities:
    local = settings.backend == "local"
    inline = settings.limits.console_inline_upload_max_bytes
    return Capabilities(
        single_process=local,  # `serve` is one process; Lambda instances share nothing but the stores
        serves_static_openapi=not local,
        admission_gate=local,
        console_inline_upload_max_bytes=inline if inline > 0 else (0 if local else AWS_INLINE_UPLOAD_MAX_BYTES),
        byog_graphs=None if local else frozenset(settings.byog.graph_ids),
    )
