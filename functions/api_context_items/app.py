"""Lambda entry point for /context list, inspect, chunks, delete and metadata: the context_items router only."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_context_items")
