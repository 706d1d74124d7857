"""Step Functions task Complete: the item becomes completed; its work files are removed."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("ingest_complete")
