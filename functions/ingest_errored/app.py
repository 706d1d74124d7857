"""Step Functions task MarkErrored (every Catch): the item ends errored with E6001 and the last error."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("ingest_errored")
