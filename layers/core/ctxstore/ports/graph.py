"""Graph store: named, isolated openCypher graphs (entity graph, item graph, BYOG collections).

Locally embedded FalkorDB; on AWS an openCypher endpoint. Queries are always
parameterised: caller data travels in `params`, never in the query text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxstore.domain.errors import StoreUnavailable


@dataclass(frozen=True)
class GraphNode:
    id: int
    labels: list[str]
    properties: dict[str, Any]


@dataclass(frozen=True)
class GraphEdge:
    id: int
    relation: str
    source_node_id: int
    target_node_id: int
    properties: dict[str, Any]


@dataclass(frozen=True)
class GraphPath:
    nodes: list[GraphNode]
    edges: list[GraphEdge]


@dataclass(frozen=True)
class GraphResult:
    columns: list[str]
    rows: list[list[Any]]  # values: JSON scalars, lists, maps, GraphNode, GraphEdge, GraphPath
    stats: dict[str, Any] = field(default_factory=dict)


class GraphTimeout(Exception):
    pass


class GraphEngineRestarted(GraphTimeout, StoreUnavailable):
    """No answer at all within the budget and its grace: the engine was killed and is restarting. To BYOG a query
    over its budget (a GraphTimeout); to every other caller a store briefly unavailable (503, Retry-After), where
    it was a 500. The call may be retried once the engine is back."""


class GraphQueryError(Exception):
    pass


# A read-only query of one graph: (graph, cypher, params).
GraphRead = tuple[str, str, dict[str, Any]]


class GraphStore(Protocol):
    def query(
        self,
        org: str,
        graph: str,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        read_only: bool = False,
        timeout_ms: int | None = None,
    ) -> GraphResult: ...

    def read_many(self, org: str, reads: Sequence[GraphRead]) -> list[GraphResult]:
        """Read-only queries of several graphs, answered in order, as `query(..., read_only=True)` would one by one
        (an answer drawn from many collections reads each one's graph)."""
        ...

    def list_graphs(self, org: str, prefix: str) -> list[str]: ...

    def drop(self, org: str, graph: str) -> bool: ...
