"""Lambda entry point for POST /query (hybrid retrieval over OpenSearch Serverless): the query router only."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("api_query")
