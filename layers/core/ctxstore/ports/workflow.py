"""Workflow starter: kicks off the ingestion of one accepted item (Step Functions on AWS, queue locally)."""

from __future__ import annotations

from typing import Any, Protocol

INGEST_QUEUE = "ingest"


class WorkflowStarter(Protocol):
    def start(self, org: str, execution_name: str, payload: dict[str, Any]) -> bool:
        """Start once per execution name; a repeat with the same name is a no-op returning False."""
        ...
