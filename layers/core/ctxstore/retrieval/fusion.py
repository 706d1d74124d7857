"""Hybrid fusion: keyword and vector hits of one or more queries become one scored candidate list.

Scores are made comparable by dividing each lane by its best score across every store and
collection searched (BM25 is unbounded, cosine is not), then mixed convexly by `alpha`. On BEIR
SciFact this max-normalised convex mix (alpha 0.5) scored nDCG@10 0.734, above min-max (0.732),
z-scores (0.732) and reciprocal-rank fusion (0.724): see docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ctxstore.ports.search_index import Hit, Store


@dataclass
class Candidate:
    chunk_id: str
    item_id: str
    collection: str
    store: Store
    keyword: float = 0.0  # normalised 0..1 within the query
    vector: float = 0.0  # normalised 0..1 within the query
    score: float = 0.0
    lanes: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class LaneHits:
    """The raw hits of one lane (keyword or vector) in one store."""

    store: Store
    lane: str  # "keyword" or "vector"
    hits: Sequence[Hit]


def _best(lanes: Iterable[LaneHits], lane: str) -> float:
    return max((h.score for lh in lanes if lh.lane == lane for h in lh.hits), default=0.0)


def fuse(lanes: Sequence[LaneHits], alpha: float) -> dict[str, Candidate]:
    """Convex mix of max-normalised lanes; a chunk missing from a lane gets 0 there."""
    best = {"keyword": _best(lanes, "keyword"), "vector": _best(lanes, "vector")}
    out: dict[str, Candidate] = {}
    for lh in lanes:
        top = best[lh.lane]
        for h in lh.hits:
            c = out.get(h.chunk_id)
            if c is None:
                c = out[h.chunk_id] = Candidate(h.chunk_id, h.item_id, h.collection, lh.store)
            norm = max(h.score, 0.0) / top if top > 0 else 0.0
            if lh.lane == "keyword":
                c.keyword = max(c.keyword, norm)
            else:
                c.vector = max(c.vector, norm)
            c.lanes.add(lh.lane)
    for c in out.values():
        c.score = (1.0 - alpha) * c.keyword + alpha * c.vector
    return out


def combine(runs: Sequence[tuple[float, dict[str, Candidate]]]) -> dict[str, Candidate]:
    """Weighted sum of several fused runs (multi-query); the first run's candidate objects are kept."""
    out: dict[str, Candidate] = {}
    total = sum(w for w, _ in runs) or 1.0
    for weight, run in runs:
        for cid, c in run.items():
            have = out.get(cid)
            if have is None:
                have = out[cid] = Candidate(c.chunk_id, c.item_id, c.collection, c.store, c.keyword, c.vector, 0.0)
            have.score += weight * c.score / total
            have.lanes |= c.lanes
    return out


def ranked(cands: Iterable[Candidate]) -> list[Candidate]:
    """Best first; ties broken by chunk id so equal scores give a stable order."""
    return sorted(cands, key=lambda c: (-c.score, c.chunk_id))
