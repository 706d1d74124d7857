"""Step Functions task Parse (statemachines/ingest.asl.json): mark processing, parse, chunk, plan embed batches."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("ingest_parse")
