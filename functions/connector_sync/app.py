"""Lambda that runs connector sync chunks (schedules, the jobs stream, a 1-minute sweep)."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("connector_sync")
