"""Workflow starter: kicks off the ingestion of one accepted item (Step Functions on AWS, queue locally)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

INGEST_QUEUE = "ingest"


class WorkflowStarter(Protocol):
    def start(self, org: str, execution_name: str, payload: dict[str, Any]) -> bool:
        """Start once per execution name; a repeat with the same name is a no-op returning False."""
        ...

    def start_many(self, org: str, starts: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
        """start() for several (execution name, payload) of one org, in as few calls as the service allows."""
        ...


def start_each(starter: WorkflowStarter, org: str, starts: Sequence[tuple[str, dict[str, Any]]]) -> list[bool]:
    """start_many for a service without a batched start: one start per execution, in order."""
    return [starter.start(org, name, payload) for name, payload in starts]
