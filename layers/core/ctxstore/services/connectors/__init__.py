"""Connectors: continuous sync from provider accounts into databases and collections (docs/connectors.md)."""

from ctxstore.services.connectors.scheduling import SYNC_QUEUE, workflow_id
from ctxstore.services.connectors.service import ConnectorService

__all__ = ["SYNC_QUEUE", "ConnectorService", "workflow_id"]
