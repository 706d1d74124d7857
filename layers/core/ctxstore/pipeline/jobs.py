"""The queues this service runs and their handlers."""

from __future__ import annotations

from ctxstore.pipeline.local_runner import QueueSpec
from ctxstore.ports.work_queue import Job
from ctxstore.services.databases import PROVISION_QUEUE
from ctxstore.services.registry import Services


def queue_specs(svc: Services) -> list[QueueSpec]:
    def provision(job: Job) -> None:
        svc.databases.provision(job.org, str(job.payload["database"]))

    return [QueueSpec(PROVISION_QUEUE, provision, lease_s=60)]
