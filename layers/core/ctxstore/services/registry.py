"""Every service of one running instance, each built on first use from the container.

Built lazily so an entry point pays only for what it calls: a Lambda function for `/query` never builds the
connector service (and so never imports a provider SDK or reads the credential vault). The wiring between
services (purgers, the event sink) does not depend on the order in which they are first used.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from ctxstore.domain.items import ItemRecord, ItemRef
from ctxstore.services.container import Container

# Each service's module is imported when the service is first built: an API function loads only the modules its
# routes reach (the databases function never loads retrieval and numpy, none but connectors the connector service).
if TYPE_CHECKING:
    from ctxstore.retrieval.graph_context import GraphContextSource
    from ctxstore.services.access.keys import KeyService
    from ctxstore.services.access.rate_limit import RateLimiter
    from ctxstore.services.byog.service import ByogService
    from ctxstore.services.connectors import ConnectorService
    from ctxstore.services.databases import DatabaseService
    from ctxstore.services.feedback import FeedbackService
    from ctxstore.services.graphs.service import GraphService
    from ctxstore.services.items.ingest import IngestService
    from ctxstore.services.items.service import ItemService
    from ctxstore.services.items.sources import SourceService
    from ctxstore.services.items.status import StatusService
    from ctxstore.services.query.service import QueryService
    from ctxstore.services.webhooks.service import WebhookService


class Services:
    def __init__(self, c: Container) -> None:
        self.container = c
        # Ingestion reports status changes through the webhook service: it is the event sink from the start.
        c.events = self.webhooks

    @cached_property
    def limiter(self) -> RateLimiter:
        from ctxstore.services.access.rate_limit import RateLimiter

        o = self.container.settings.limits
        return RateLimiter(
            {
                "default": (o.rate_limit_per_minute, o.rate_limit_burst or o.rate_limit_per_minute),
                "query": (
                    o.query_rate_limit_per_minute or o.rate_limit_per_minute,
                    o.rate_limit_burst or o.query_rate_limit_per_minute or o.rate_limit_per_minute,
                ),
            }
        )

    @cached_property
    def webhooks(self) -> WebhookService:
        from ctxstore.services.webhooks.service import WebhookService

        return WebhookService(self.container, settings=self.container.settings.webhooks)

    @cached_property
    def keys(self) -> KeyService:
        from ctxstore.services.access.keys import KeyService

        return KeyService(self.container)

    @cached_property
    def databases(self) -> DatabaseService:
        from ctxstore.services.databases import DatabaseService

        databases = DatabaseService(self.container, max_per_org=self.container.settings.limits.max_databases_per_org)
        if self._has_graph:  # a database or collection purge removes its share of both graphs
            databases.add_purger(self._purge_scope_graphs)
        return databases

    @cached_property
    def items(self) -> ItemService:
        from ctxstore.services.items.service import ItemService

        return ItemService(self.container, single_process=self.container.capabilities.single_process)

    @cached_property
    def sources(self) -> SourceService:
        from ctxstore.services.items.sources import SourceService

        sources = SourceService(self.container, self.databases, self.items)
        if self._has_graph:  # an item's delete or metadata change reaches both graphs
            sources.add_purger(self._purge_item_graphs)
            sources.add_metadata_listener(self._update_graph_access)
        return sources

    @cached_property
    def ingest(self) -> IngestService:
        from ctxstore.services.items.ingest import IngestService

        return IngestService(self.container, self.databases, self.items)

    @cached_property
    def status(self) -> StatusService:
        from ctxstore.services.items.status import StatusService

        return StatusService(self.databases, self.items)

    @cached_property
    def byog(self) -> ByogService | None:
        from ctxstore.services.byog.service import ByogService

        c = self.container
        return ByogService(c, c.settings.byog, hosted=c.capabilities.byog_graphs)

    @cached_property
    def graphs(self) -> GraphService | None:
        from ctxstore.services.graphs.service import GraphService

        return GraphService(self.container, self.databases, self.items) if self._has_graph else None

    @property
    def graph_context(self) -> GraphContextSource | None:
        """What POST /query asks for the relations behind its chunks."""
        return self.graphs

    @cached_property
    def query(self) -> QueryService | None:
        from ctxstore.services.query.service import QueryService

        return QueryService(self.container, self.databases, self.items, graph_context=self.graphs)

    @cached_property
    def feedback(self) -> FeedbackService:
        from ctxstore.services.feedback import FeedbackService

        return FeedbackService(self.container, self.databases)

    @cached_property
    def connectors(self) -> ConnectorService | None:
        from ctxstore.services.connectors import ConnectorService

        c = self.container
        return ConnectorService(
            c,
            self.databases,
            self.ingest,
            self.sources,
            self.items,
            settings=c.settings.connectors,
            single_process=c.capabilities.single_process,
        )

    # ---- wiring that resolves the graph service only when a purge or change happens ---------------------
    @property
    def _has_graph(self) -> bool:
        return self.container.configured("graph")

    def _graphs(self) -> GraphService:
        graphs = self.graphs
        assert graphs is not None  # registered only when a graph is configured
        return graphs

    def _purge_scope_graphs(self, org: str, database: str, collection: str | None) -> None:
        self._graphs().purge_scope(org, database, collection)

    def _purge_item_graphs(self, org: str, ref: ItemRef) -> None:
        self._graphs().purge_item(org, ref)

    def _update_graph_access(self, org: str, ref: ItemRef, metadata: ItemRecord) -> None:
        self._graphs().update_access(org, ref, metadata)


def build_services(c: Container) -> Services:
    return Services(c)
