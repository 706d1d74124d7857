"""Lambda entry point for the web console (/console): the console pages over every service, no API router."""

from ctxstore.runtime.lambda_handlers import handler_for

handler = handler_for("console_web")
