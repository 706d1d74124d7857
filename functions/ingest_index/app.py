"""Step Functions task Index: replace the item's chunks in the search index; the item becomes graph_creation."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("ingest_index")
