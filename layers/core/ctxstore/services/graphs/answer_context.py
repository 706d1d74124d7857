"""The graph context of a query's answer (`POST /query`): the relations behind its chunks and the paths near them.

Every collection has a graph of its own, so an answer whose chunks come from several collections reads several
graphs: the relations the chunks carry in each, then the neighbourhood of their entities in those that have some.
Each of the two is one GraphStore.read_many for every graph (the embedded engine takes it in one round trip; a query
into 100 weighted collections meets ~9 graphs, whose reads on four threads took 3-4 ms beside the query's own work,
issue 28 goal 7). The parts are merged in the order of the collections: the answer is the one a read of each graph
in turn gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ctxstore.domain.graph_keys import graph_name
from ctxstore.retrieval.graph_context import GraphContext, GraphContextRequest, PathGroup
from ctxstore.services.graphs.entity_graph import EntityGraph
from ctxstore.services.graphs.shapes import path_group

_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class _Part:
    """What one collection's graph contributes."""

    chunk_groups: list[PathGroup] = field(default_factory=list)
    scored: list[tuple[float, tuple[Any, Any, Any]]] = field(default_factory=list)
    eids: set[str] = field(default_factory=set)


def _chunk_part(edges: list[Any], chunk_rank: dict[str, int]) -> _Part:
    """The relations of the ranked chunks in one graph, grouped by chunk, and the entities they name."""
    part = _Part()
    by_chunk: dict[str, list[Any]] = {}
    for a, b, r in edges:
        by_chunk.setdefault(str(r.properties.get("chunk_id")), []).append((a, b, r))
        part.eids.update((str(a.properties["eid"]), str(b.properties["eid"])))
    for cid, triples in by_chunk.items():
        rank = chunk_rank.get(cid, len(chunk_rank))
        conf = sum(float(r.properties.get("confidence") or 0) for _, _, r in triples) / len(triples)
        part.chunk_groups.append(path_group([cid], triples, conf / (1 + rank)))
    return part


def _scored(edges: list[Any], terms: set[str]) -> list[tuple[float, tuple[Any, Any, Any]]]:
    """Paths near the chunks' entities, scored by confidence and the query words they mention."""
    out = []
    for a, b, r in edges:
        named = (a.properties.get("name"), b.properties.get("name"), r.properties.get("context"))
        text = " ".join(str(x) for x in named)
        overlap = len(terms & set(_WORD.findall(text.casefold())))
        score = float(r.properties.get("confidence") or 0) * (1 + overlap) / (1 + len(terms))
        out.append((round(score, 6), (a, b, r)))
    return out


def answer_graph_context(entities: EntityGraph, request: GraphContextRequest) -> GraphContext:
    graphs = [graph_name(request.store, request.database, c) for c in request.collections]
    chunk_rank = {cid: i for i, cid in enumerate(request.chunk_ids)}
    terms = set(_WORD.findall(request.query.casefold()))
    edges = entities.chunk_edges(request.org, graphs, list(request.chunk_ids), 20 * request.max_groups)
    parts = [_chunk_part(found, chunk_rank) for found in edges]
    # Only graphs whose chunks carry relations have entities to expand from: the others cost no second read.
    expand = [(graph, sorted(part.eids)) for graph, part in zip(graphs, parts, strict=True) if part.eids]
    near = iter(entities.neighbour_edges(request.org, expand, 4 * request.max_groups))
    for part in parts:
        if part.eids:
            part.scored = _scored(next(near), terms)
    chunk_groups = [g for p in parts for g in p.chunk_groups]
    scored = [s for p in parts for s in p.scored]
    chunk_groups.sort(key=lambda g: -g["relevancy_score"])
    chunk_groups = chunk_groups[: request.max_groups]
    # Only the best max_groups paths are answered: shape those (a hash and two entity views each), not all.
    scored.sort(key=lambda s: -s[0])
    paths = [path_group([str(t[2].properties.get("chunk_id") or "")], [t], s) for s, t in scored[: request.max_groups]]
    mapping: dict[str, list[str]] = {}
    for g in chunk_groups + paths:
        for cid in g["source_chunk_ids"]:
            if cid in chunk_rank:
                mapping.setdefault(cid, []).append(g["group_id"])
    return {"chunk_relations": chunk_groups, "query_paths": paths, "chunk_id_to_group_ids": mapping}
