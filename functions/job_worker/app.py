"""Lambda that runs queued jobs (JobsTable): woken by the table's stream on insert and by a 1-minute schedule."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("job_worker")
