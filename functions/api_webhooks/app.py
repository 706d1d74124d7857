"""Lambda entry point for the /webhooks/indexing routes: the webhooks router only (HTTP API v2)."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_webhooks")
