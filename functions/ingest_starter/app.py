"""Lambda on IngestStartQueue: starts ingestion executions, at most CTXSTORE_INGEST_MAX_RUNNING running at once."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("ingest_starter")
