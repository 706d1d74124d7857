"""What the graph routes render: the `data` of `GET /context/relations` and `GET /context/{id}/subgraph`,
exactly their JSON keys. Relation groups and members stay plain dicts: their shape is the reference
OpenAPI's and is built from graph rows in `entity_graph.py`, `item_graph.py` and `shapes.py`."""

from __future__ import annotations

from typing import Any, TypedDict


class RelationsAnswer(TypedDict):
    """GET /context/relations: one page of ranked relation groups (or one item's), and the item's mentions."""

    success: bool
    message: str
    relations: list[dict[str, Any]]
    auxiliary_relations: list[dict[str, Any]]
    auxiliary_truncated: bool
    is_truncated: bool
    next_cursor: float | None


class SubgraphAnswer(TypedDict):
    """GET /context/{id}/subgraph: the sources reached from the seed, the relations among them."""

    seed_source_id: str
    sources: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    auxiliary_relations: list[dict[str, Any]]
    auxiliary_truncated: bool
    is_truncated: bool
    max_depth_reached: int
    success: bool
    message: str
