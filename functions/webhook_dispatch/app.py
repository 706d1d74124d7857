"""Lambda for webhook deliveries on SQS (WebhookQueue), with partial-batch failure reporting."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("webhook_dispatch")
