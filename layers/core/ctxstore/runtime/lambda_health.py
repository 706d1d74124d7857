"""GET /health on Lambda without the web framework: liveness needs no key and touches no data, so its cold
start imports the standard library and nothing else (FastAPI alone takes longer than the whole answer)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from ctxstore import API_VERSION
from ctxstore.runtime.lambda_entry import LambdaEntry


def health_handler() -> LambdaEntry:
    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        request_id = str((event.get("requestContext") or {}).get("requestId") or uuid.uuid4())
        return {
            "statusCode": 200,
            "headers": {
                "content-type": "application/json",
                "x-request-id": request_id,
                "x-api-version": API_VERSION,
            },
            "body": json.dumps({"status": "ok", "api_version": API_VERSION}),
            "isBase64Encoded": False,
        }

    return LambdaEntry(handle)
