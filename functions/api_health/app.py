"""Lambda entry point for GET /health: the health router only, behind API Gateway (HTTP API, payload v2)."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_health")
