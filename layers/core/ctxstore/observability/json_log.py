"""`ctxstore serve --log-format json`: one JSON object per log line.

Request lines (logger `ctxstore.access`) carry request_id, method, route (the template, never the raw path: a
signed blob URL's token is a credential), status, latency_ms and org_id; never a header, query string or body.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

ACCESS_LOGGER = "ctxstore.access"
# The request fields a record may carry (`extra=`), copied into the line as they are.
FIELDS = ("request_id", "method", "route", "status", "latency_ms", "org_id")


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(log_format: str) -> None:
    """Root logging for `serve`: text lines as before, or JSON lines; uvicorn's loggers propagate to it."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLineFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    # Text mode keeps uvicorn's access lines; JSON mode replaces them with ours (which carry the request id).
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.INFO if log_format == "json" else logging.WARNING)
