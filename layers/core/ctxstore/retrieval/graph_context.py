"""The seam between the query service and the entity graph.

`POST /query` asks a `GraphContextSource` for the relations behind the chunks
it ranked. The graph service implements it over the graph port; until one is
wired (`Services.graph_context is None`) queries answer without graph context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from ctxstore.ports.search_index import Store


@dataclass(frozen=True)
class GraphContextRequest:
    org: str
    database: str
    collections: Sequence[str]
    store: Store
    query: str
    chunk_ids: Sequence[str]  # the ranked chunks of the answer, best first
    item_ids: Sequence[str]  # their items, de-duplicated, best first
    max_groups: int = 20


class PathGroup(TypedDict):
    """A scored group of relations (the reference's `search.GraphPathGroup`); a triplet is `{source, target,
    relation}` with entity views and the relation's evidence."""

    group_id: str
    relevancy_score: float
    combined_context: str
    source_chunk_ids: list[str]
    triplets: list[dict[str, Any]]


class GraphContext(TypedDict):
    chunk_relations: list[PathGroup]
    query_paths: list[PathGroup]
    chunk_id_to_group_ids: dict[str, list[str]]


class GraphContextSource(Protocol):
    def graph_context(self, request: GraphContextRequest) -> GraphContext:
        """The `search.GraphContext` object of the reference OpenAPI.

        Keys: `chunk_relations` and `query_paths` (lists of scored path groups:
        `group_id`, `relevancy_score`, `combined_context`, `source_chunk_ids`,
        `triplets[]` of `{source, target, relation}`), and
        `chunk_id_to_group_ids`. Relation evidence carries Unix epoch float
        timestamps here and `origin: "byog"` on caller-supplied edges.
        """
        ...
