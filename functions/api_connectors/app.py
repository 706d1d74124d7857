"""Lambda entry point for /connectors*, /connector-discovery and /connector-catalog: the connectors router only."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_connectors")
