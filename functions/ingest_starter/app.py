"""Lambda on the ingest start queue (IngestStartQueue): starts ingestion executions, at most
CTXSTORE_INGEST_MAX_RUNNING running at once (adapters/aws/ingest_starts.py). Its event source mapping runs
at most 2 of these at once; messages it cannot start yet are reported in `batchItemFailures`."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.adapters.aws.ingest_starts import BoundedStarts, ExecutionSlots
from ctxstore.adapters.aws.sfn_workflow import SfnWorkflowStarter
from ctxstore.bootstrap import build_aws
from ctxstore.config import Settings

logger = Logger()
tracer = Tracer()
metrics = Metrics()

# Built once per cold start (clients only, no network calls) and reused by every invocation.
settings = Settings()
container = build_aws(settings)
sfn = SfnWorkflowStarter(settings.state_machine_arn)
starts = BoundedStarts(
    sfn=sfn,
    slots=ExecutionSlots(container.records, sfn.status, settings.ingest_max_running),
    sqs=map_faults(make_client("sqs")),
    queue_url=settings.ingest_start_queue_url,
)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return starts.run(event["Records"], context.get_remaining_time_in_millis() / 1000)
