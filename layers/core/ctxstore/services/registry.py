"""Every service of one running instance, each built on first use from the container.

Built lazily so an entry point pays only for what it calls: a Lambda function for `/query` never builds the
connector service (and so never imports a provider SDK or reads the credential vault). The wiring between
services (purgers, the event sink) does not depend on the order in which they are first used.

Each service names the ports it uses in its constructor. The records store and the clock are read here, when
the service is built (every path of every service uses them; the connector service, built only where connectors
are served, also takes its queue, scheduler and providers built); a port only some paths use is handed over as a
provider (`lambda: c.<port>`), read per call, so building a service builds no such adapter (on AWS a port read
builds a boto3 client). A port a deployment may lack is passed as None (each constructor says where).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.items import ItemRecord, ItemRef
from ctxstore.services.container import Container

T = TypeVar("T")
GRAPH_MISSING = "the graph engine is not configured on this deployment"
CONNECTORS_MISSING = "connectors are not configured on this deployment"
SEARCH_MISSING = "search is not configured on this deployment"

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
    from ctxstore.services.items.catalog import ItemCatalog
    from ctxstore.services.items.ingest import IngestService
    from ctxstore.services.items.service import ItemService
    from ctxstore.services.items.status import StatusService
    from ctxstore.services.query.service import QueryService
    from ctxstore.services.webhooks.service import WebhookService


class Services:
    def __init__(self, c: Container) -> None:
        self.container = c
        # Ingestion reports status changes through the webhook service: it is the event sink, built on first emit.
        c.defer("events", lambda: self.webhooks)

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

        c = self.container
        return WebhookService(
            c.records,
            c.clock,
            queue=lambda: c.queue,
            sender=_present(lambda: c.http_sender, "webhook delivery is not configured on this server"),
            settings=c.settings.webhooks,
        )

    @cached_property
    def keys(self) -> KeyService:
        from ctxstore.services.access.keys import KeyService

        return KeyService(self.container.records, self.container.clock)

    @cached_property
    def databases(self) -> DatabaseService:
        from ctxstore.services.databases import DatabaseService

        c = self.container
        databases = DatabaseService(
            c.records,
            c.clock,
            queue=lambda: c.queue,
            blobs=lambda: c.blobs,
            search_index=lambda: c.search_index,
            max_per_org=c.settings.limits.max_databases_per_org,
        )
        if self._has_graph:  # a database or collection purge removes its share of both graphs
            databases.add_purger(self._purge_scope_graphs)
        return databases

    @cached_property
    def items(self) -> ItemService:
        from ctxstore.services.items.service import ItemService

        c = self.container
        return ItemService(c.records, c.clock, events=lambda: c.events, single_process=c.capabilities.single_process)

    @cached_property
    def catalog(self) -> ItemCatalog:
        from ctxstore.services.items.catalog import ItemCatalog

        c = self.container
        catalog = ItemCatalog(
            c.records,
            c.clock,
            self.databases,
            self.items,
            blobs=lambda: c.blobs,
            search_index=lambda: c.search_index,
        )
        if self._has_graph:  # an item's delete or metadata change reaches both graphs
            catalog.add_purger(self._purge_item_graphs)
            catalog.add_metadata_listener(self._update_graph_access)
        return catalog

    @cached_property
    def ingest(self) -> IngestService:
        from ctxstore.services.items.ingest import IngestService

        c = self.container
        return IngestService(
            c.records, c.clock, self.databases, self.items, blobs=lambda: c.blobs, workflow=lambda: c.workflow
        )

    @cached_property
    def status(self) -> StatusService:
        from ctxstore.services.items.status import StatusService

        return StatusService(self.databases, self.items)

    @cached_property
    def byog(self) -> ByogService | None:
        from ctxstore.services.byog.service import ByogService

        c = self.container
        graph = _present(lambda: c.graph, GRAPH_MISSING) if self._has_graph else None
        return ByogService(c.records, c.clock, graph, c.settings.byog, hosted=c.capabilities.byog_graphs)

    @cached_property
    def graphs(self) -> GraphService | None:
        from ctxstore.services.graphs.service import GraphService

        if not self._has_graph:
            return None
        c = self.container
        return GraphService(
            c.records,
            self.databases,
            self.items,
            graph=_present(lambda: c.graph, GRAPH_MISSING),
            blobs=lambda: c.blobs,
            extractor=lambda: c.extractor,
        )

    @property
    def graph_context(self) -> GraphContextSource | None:
        """What POST /query asks for the relations behind its chunks."""
        return self.graphs

    @cached_property
    def query(self) -> QueryService | None:
        from ctxstore.services.query.service import QueryService

        c = self.container
        return QueryService(
            c.clock,
            self.databases,
            self.items,
            search_index=_present(lambda: c.search_index, SEARCH_MISSING),
            embedder=lambda: c.embedder,
            reranker=lambda: c.reranker,
            graph_context=self.graphs,
        )

    @cached_property
    def feedback(self) -> FeedbackService:
        from ctxstore.services.feedback import FeedbackService

        return FeedbackService(self.container.records, self.container.clock, self.databases)

    @cached_property
    def connectors(self) -> ConnectorService | None:
        from ctxstore.services.connectors import ConnectorService

        c = self.container
        vault = _present(lambda: c.vault, CONNECTORS_MISSING) if c.configured("vault") else None
        return ConnectorService(
            c.records,
            c.clock,
            c.queue,
            c.scheduler,
            vault,
            c.connector_providers,
            self.databases,
            self.ingest,
            self.catalog,
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


def _present(read: Callable[[], T | None], missing: str) -> Callable[[], T]:
    """A provider of a port the service cannot work without: 503 SERVICE_UNAVAILABLE if this container has none."""

    def port() -> T:
        value = read()
        if value is None:
            raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, missing)
        return value

    return port


def build_services(c: Container) -> Services:
    return Services(c)
