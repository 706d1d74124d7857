"""Step Functions task Graph: the item's graph step (graph_payload or extraction); relations created."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("ingest_graph")
