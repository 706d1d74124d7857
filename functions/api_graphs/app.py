"""Lambda entry point for GET /context/relations and the two subgraph reads: the graphs router only."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_graphs")
