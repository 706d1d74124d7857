"""Hybrid fusion: keyword and vector hits of one or more queries become one scored candidate list.

Each lane's scores (pooled over every store and collection searched) become z-scores, clipped at
0 so below-average hits count like missing ones, then mix convexly by `alpha`. BM25 is unbounded
and cosines bunch together (a conversation's turns all sit at 0.3-0.6), so dividing by the best
score let the vector lane add near-uniform noise: on LoCoMo that max-normalised mix fell below
BM25 alone (R@10 0.60 vs 0.58 BM25, 0.64 with clipped z-scores), while on SciFact both give
nDCG@10 0.734 (min-max 0.732, reciprocal-rank fusion 0.724). Numbers: docs/benchmarks.md.
A lane with only a handful of hits (a small collection) has no usable spread; it is divided by
its best score instead, so every hit keeps a non-zero score for weights and recency to act on.
A lane that returned fewer hits than it was asked for (`complete`) matched nothing else: every other
candidate scores exactly 0 there, and its z-scores count those zeros. Without them a unique term
(one keyword hit among 1,000 similar items) scored 1.0 against the vector lane's z of 3-4 for
chunks that merely resembled the query, and fell out of `fast`'s top 10 while `text` ranked it first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ctxstore.ports.search_index import Hit, Store


@dataclass
class Candidate:
    chunk_id: str
    item_id: str
    collection: str
    store: Store
    keyword: float = 0.0  # clipped z-score within the query
    vector: float = 0.0  # clipped z-score within the query
    score: float = 0.0
    lanes: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class LaneHits:
    """The raw hits of one lane (keyword or vector) in one store."""

    store: Store
    lane: str  # "keyword" or "vector"
    hits: Sequence[Hit]
    complete: bool = False  # fewer hits than asked for: no other chunk in scope matches this lane


def lane_hits(store: Store, lane: str, hits: Sequence[Hit], limit: int) -> LaneHits:
    return LaneHits(store, lane, hits, complete=len(hits) < limit)


MIN_Z_SAMPLE = 10  # below this many hits a lane's spread says little: divide by its best score instead


def _normaliser(lanes: Sequence[LaneHits], lane: str, candidates: int) -> Callable[[float], float]:
    mine = [lh for lh in lanes if lh.lane == lane]
    scores = [h.score for lh in mine for h in lh.hits]
    if mine and all(lh.complete for lh in mine) and candidates >= MIN_Z_SAMPLE:
        scores += [0.0] * (candidates - len(scores))  # the candidates this lane did not match
    if len(scores) < MIN_Z_SAMPLE:
        best = max(scores, default=0.0)
        return lambda s: max(s, 0.0) / best if best > 0 else 0.0
    # math, not statistics: pstdev's exact rational arithmetic cost ~1 ms per query for 200 scores.
    mean = math.fsum(scores) / len(scores)
    std = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / len(scores)) or 1.0
    return lambda s: max(0.0, (s - mean) / std)


def fuse(lanes: Sequence[LaneHits], alpha: float) -> dict[str, Candidate]:
    """Convex mix of clipped z-scores per lane; a chunk missing from a lane gets 0 there."""
    candidates = len({h.chunk_id for lh in lanes for h in lh.hits})
    norms = {lane: _normaliser(lanes, lane, candidates) for lane in ("keyword", "vector")}
    out: dict[str, Candidate] = {}
    for lh in lanes:
        norm_of = norms[lh.lane]
        for h in lh.hits:
            c = out.get(h.chunk_id)
            if c is None:
                c = out[h.chunk_id] = Candidate(h.chunk_id, h.item_id, h.collection, lh.store)
            norm = norm_of(h.score)
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
