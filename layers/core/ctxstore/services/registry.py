"""Every service of one running instance, built once from the container."""

from __future__ import annotations

from dataclasses import dataclass

from ctxstore.retrieval.graph_context import GraphContextSource
from ctxstore.services.byog import ByogService
from ctxstore.services.connectors import ConnectorService
from ctxstore.services.container import Container
from ctxstore.services.databases import DatabaseService
from ctxstore.services.graphs import GraphService
from ctxstore.services.ingest import IngestService
from ctxstore.services.items import ItemService
from ctxstore.services.keys import KeyService
from ctxstore.services.query import QueryService
from ctxstore.services.rate_limit import RateLimiter
from ctxstore.services.sources import SourceService
from ctxstore.services.status import StatusService
from ctxstore.services.webhooks import WebhookService


@dataclass
class Services:
    container: Container
    keys: KeyService
    databases: DatabaseService
    limiter: RateLimiter
    items: ItemService
    ingest: IngestService
    status: StatusService
    sources: SourceService
    byog: ByogService | None = None
    webhooks: WebhookService | None = None
    graphs: GraphService | None = None
    graph_context: GraphContextSource | None = None  # POST /query asks it for relations behind the chunks
    query: QueryService | None = None
    connectors: ConnectorService | None = None


def build_services(c: Container) -> Services:
    o = c.options
    limiter = RateLimiter(
        {
            "default": (o.rate_limit_per_minute, o.rate_limit_burst or o.rate_limit_per_minute),
            "query": (
                o.query_rate_limit_per_minute or o.rate_limit_per_minute,
                o.rate_limit_burst or o.query_rate_limit_per_minute or o.rate_limit_per_minute,
            ),
        }
    )
    webhooks = WebhookService(c, c.http_sender)
    c.events = webhooks  # before the services that emit: ingestion reports status changes through it
    databases = DatabaseService(c)
    items = ItemService(c)
    sources = SourceService(c, databases, items)
    graphs = GraphService(c, databases, items) if c.graph is not None else None
    if graphs is not None:  # deletes remove an item's or a scope's share of both graphs
        databases.add_purger(graphs.purge_scope)
        sources.add_purger(graphs.purge_item)
        sources.add_metadata_listener(graphs.update_access)
    ingest = IngestService(c, databases, items)
    return Services(
        container=c,
        keys=KeyService(c),
        databases=databases,
        limiter=limiter,
        byog=ByogService(c),
        items=items,
        ingest=ingest,
        status=StatusService(databases, items),
        sources=sources,
        graphs=graphs,
        graph_context=graphs,
        query=QueryService(c, databases, items, graph_context=graphs),
        webhooks=webhooks,
        connectors=ConnectorService(c, databases, ingest, sources, items),
    )
