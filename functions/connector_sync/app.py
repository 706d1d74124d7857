"""Lambda that runs connector sync chunks: the target of every connector's EventBridge Scheduler schedule,
woken too by the jobs table's stream (a manual or configure-triggered sync) and by a 1-minute sweep.

A schedule event `{"schedule": {"org", "payload": {"connector_id"}, ...}}` queues that connector's sync
(job id = connector id: never twice at once); then queued chunks run through the same service code as
`ctxstore serve`, one at a time, while the invocation has time left for a whole chunk.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from ctxstore.bootstrap import build_aws
from ctxstore.config import Settings
from ctxstore.pipeline.jobs import connector_spec
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.services.registry import build_services

logger = Logger()
tracer = Tracer()
metrics = Metrics()

settings = Settings()
container = build_aws(settings)
connectors = build_services(container).connectors
assert connectors is not None
runner = LocalRunner(container.queue, [connector_spec(connectors)], threads=1)
# Never start a chunk that cannot finish: its time budget, the longest provider wait, a margin.
RESERVE_MS = int((settings.connector_chunk_seconds + settings.connector_max_wait_s + 60) * 1000)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    assert connectors is not None
    queued = 0
    schedule = event.get("schedule")
    if isinstance(schedule, dict):
        connector_id = str((schedule.get("payload") or {}).get("connector_id") or schedule.get("schedule_id"))
        every_s = int(schedule.get("every_s") or 3600)
        queued = int(connectors.scheduling.on_schedule(str(schedule["org"]), connector_id, every_s))
    ran = 0
    while context.get_remaining_time_in_millis() > RESERVE_MS and runner.run_once():
        ran += 1
    metrics.add_metric(name="ConnectorChunksRun", unit=MetricUnit.Count, value=ran)
    return {"queued": queued, "ran": ran}
