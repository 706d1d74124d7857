"""Lambda entry point for /databases and the legacy /tenants routes: the databases router only (HTTP API v2)."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_databases")
