"""The graph context of a query's answer (`POST /query`): the relations behind its chunks and the paths near them.

Every collection has a graph of its own, so an answer whose chunks come from several collections reads several
graphs: one read of the relations the chunks carry, then one of their entities' neighbourhood, per graph. Those
reads go to the engine side by side (a query into 100 weighted collections meets ~10 graphs; one after the other
they took 2.4-3.0 ms against 0.8-0.9 for one graph, issue 28 goal 7). The parts are merged in the order of the
collections, so the answer is the same as one read after the other would give.
"""

from __future__ import annotations

import contextvars
import functools
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ctxstore.domain.graph_keys import graph_name
from ctxstore.retrieval.graph_context import GraphContext, GraphContextRequest, PathGroup
from ctxstore.services.graphs.entity_graph import EntityGraph
from ctxstore.services.graphs.shapes import path_group

_WORD = re.compile(r"[a-z0-9]+")
# Graph reads at once for one answer (the engine answers reads on its own threads).
_READS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ctxstore-graph-read")


@dataclass
class _Part:
    """What one collection's graph contributes."""

    chunk_groups: list[PathGroup] = field(default_factory=list)
    scored: list[tuple[float, tuple[Any, Any, Any]]] = field(default_factory=list)


def _collection_part(
    entities: EntityGraph, request: GraphContextRequest, chunk_rank: dict[str, int], terms: set[str], collection: str
) -> _Part:
    part = _Part()
    graph = graph_name(request.store, request.database, collection)
    edges = entities.chunk_edges(request.org, graph, list(request.chunk_ids), 20 * request.max_groups)
    by_chunk: dict[str, list[Any]] = {}
    eids: set[str] = set()
    for a, b, r in edges:
        by_chunk.setdefault(str(r.properties.get("chunk_id")), []).append((a, b, r))
        eids.update((str(a.properties["eid"]), str(b.properties["eid"])))
    for cid, triples in by_chunk.items():
        rank = chunk_rank.get(cid, len(chunk_rank))
        conf = sum(float(r.properties.get("confidence") or 0) for _, _, r in triples) / len(triples)
        part.chunk_groups.append(path_group([cid], triples, conf / (1 + rank)))
    if not eids:  # nothing to expand from: spare the graph engine a round trip
        return part
    for a, b, r in entities.neighbour_edges(request.org, graph, sorted(eids), 4 * request.max_groups):
        named = (a.properties.get("name"), b.properties.get("name"), r.properties.get("context"))
        text = " ".join(str(x) for x in named)
        overlap = len(terms & set(_WORD.findall(text.casefold())))
        score = float(r.properties.get("confidence") or 0) * (1 + overlap) / (1 + len(terms))
        part.scored.append((round(score, 6), (a, b, r)))
    return part


def answer_graph_context(entities: EntityGraph, request: GraphContextRequest) -> GraphContext:
    collections = list(request.collections)
    chunk_rank = {cid: i for i, cid in enumerate(request.chunk_ids)}
    terms = set(_WORD.findall(request.query.casefold()))
    part_of = functools.partial(_collection_part, entities, request, chunk_rank, terms)
    if len(collections) > 1:
        # Each read in a copy of the caller's context: its spans stay children of the query's.
        futures = [_READS.submit(contextvars.copy_context().run, part_of, c) for c in collections]
        parts = [f.result() for f in futures]
    else:
        parts = [part_of(c) for c in collections]
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
