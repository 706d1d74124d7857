"""Lambda entry point for the /byog graph routes: the byog router only (HTTP API v2)."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_byog")
