"""Write the AWS API's OpenAPI document (layers/core/ctxstore/http/openapi_aws.json).

On AWS each Lambda holds one router group, so none can build the whole document at run time without importing
every router; API Gateway routes GET /openapi.json to one function, which answers this file instead. It is the
local server's document for the routers the SAM template routes (every group but signed_blobs: on AWS uploads
go to S3 presigned POSTs). tests/aws/test_template.py fails when the committed file is stale.

Usage: uv run python scripts/export-openapi.py [OUTPUT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ctxstore.http import factory, openapi_doc
from ctxstore.http.app import ALL_ROUTERS
from ctxstore.http.routers import signed_blobs

LOCAL_ONLY = (signed_blobs.router,)


def aws_document() -> dict[str, Any]:
    app = factory.routed_app([r for r in ALL_ROUTERS if r not in LOCAL_ONLY])
    openapi_doc.install(app)
    return app.openapi()


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else openapi_doc.AWS_DOCUMENT
    out.write_text(render(aws_document()), encoding="utf-8")
    print(f"wrote {out}")
