"""Lambda entry point for POST /context/ingest and GET /context/status: the context_ingest router only (HTTP API v2)."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_context_ingest")
