"""Step Functions task EmbedBatch (inside the Embed Map): vectors for one batch of chunks, reusing known ones."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("ingest_embed")
