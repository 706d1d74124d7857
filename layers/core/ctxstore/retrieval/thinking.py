"""Thinking mode: multi-query expansion, fusion of every pass, and reranking of the fused pool.

1. Expansion (offline, no LLM): the query's clauses as sub-queries (multi-hop questions ask for
   several facts), and for short queries a keyword sub-query of the terms that best separate the
   first pass's top chunks from the rest of its pool (RM3-style pseudo-relevance feedback, kept
   at a low weight).
2. Every (sub-)query runs both lanes; the passes are fused with weights (the original query counts
   most) into one candidate pool.
3. Rerank of the fused pool by best-sentence coverage of the query (see `rerank`), which costs no
   model call. Measured on SciFact (docs/benchmarks.md): embedding every sentence of the pool with
   MiniLM and adding the best sentence cosine gained +0.013 nDCG@10 but costs ~2 s per query on
   this machine; embedding only the lexically best sentences lost the gain. No cross-encoder ships
   in an installable package (searched: see the report of issue 4).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.reranker import Reranker
from ctxstore.retrieval.fusion import Candidate, combine, fuse, ranked
from ctxstore.retrieval.hybrid import HybridRetriever, Pass, RetrievalScope
from ctxstore.retrieval.signals import CLAUSE_SPLIT, content_terms

RERANK_POOL = 30
RERANK_WEIGHT = 0.2
MODEL_RERANK_WEIGHT = 2.0  # a cross-encoder knows more than the fused lanes: it decides the order
MIN_PASSAGE_CHARS = 400  # a pool averaging fewer characters holds turns or notes, not passages
SUBQUERY_WEIGHT = 0.5
FEEDBACK_WEIGHT = 0.1
FEEDBACK_DOCS = 3
FEEDBACK_TERMS = 8
# Feedback only for terse queries: allowed up to 4 terms it cost LoCoMo ~1 point of R@10, and on
# long SciFact claims 0.01 nDCG@10.
FEEDBACK_MAX_TERMS = 2
MAX_SENTENCES = 12
MAX_SENTENCE_CHARS = 400

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])|\n{2,}")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Plan:
    candidates: dict[str, Candidate]
    queries: list[str]


def clauses(query: str) -> list[str]:
    """Sub-questions of a compound query (see CLAUSE_SPLIT); empty unless two are substantial."""
    parts = [p.strip() for p in CLAUSE_SPLIT.split(query) if p.strip()]
    parts = [p for p in parts if len(content_terms(p)) >= 2]
    return parts if len(parts) >= 2 else []


def feedback_terms(query: str, top: Sequence[str], pool: Sequence[str], n: int = FEEDBACK_TERMS) -> list[str]:
    """Terms frequent in the top texts and rare in the rest of the pool, not already in the query."""
    if not top or not pool:
        return []
    df: Counter[str] = Counter()
    for text in pool:
        df.update({w.lower() for w in _WORD.findall(text)})
    tf: dict[str, float] = {}
    for text in top:
        words = [w.lower() for w in _WORD.findall(text)]
        for w, k in Counter(words).items():
            tf[w] = tf.get(w, 0.0) + k / max(1, len(words))
    asked = set(content_terms(query)) | {w.lower() for w in _WORD.findall(query)}
    scored = {
        w: tf[w] * math.log((len(pool) + 1) / (df[w] + 0.5))
        for w in tf
        if w not in asked and len(w) > 2 and not w.isdigit() and w in set(content_terms(w))
    }
    return [w for w, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def sentences(text: str) -> list[str]:
    parts = [p.strip()[:MAX_SENTENCE_CHARS] for p in _SENTENCE.split(text) if len(p.strip()) > 20]
    return parts[:MAX_SENTENCES] or [text[:MAX_SENTENCE_CHARS]]


def think(
    r: HybridRetriever,
    scope: RetrievalScope,
    query: str,
    vector_text: str,
    first: Pass,
    *,
    alpha: float,
    operator: str,
    depth: int,
    text_only: bool,
) -> Plan:
    runs: list[tuple[float, dict[str, Candidate]]] = [(1.0, fuse(first.lanes, alpha))]
    queries = [query]
    for sub in clauses(query):
        p = r.run(scope, sub, sub, keyword=True, vector=not text_only, operator=operator, depth=depth)
        runs.append((SUBQUERY_WEIGHT, fuse(p.lanes, alpha)))
        queries.append(sub)
    pool = ranked(combine(runs).values())[:RERANK_POOL]
    texts = {d.chunk_id: d.text for d in r.index.get_chunks(scope.org, [c.chunk_id for c in pool])}
    if operator == "or" and FEEDBACK_WEIGHT > 0 and len(content_terms(query)) <= FEEDBACK_MAX_TERMS:
        terms = feedback_terms(
            query, [texts.get(c.chunk_id, "") for c in pool[:FEEDBACK_DOCS]], [texts.get(c.chunk_id, "") for c in pool]
        )
        if terms:
            expanded = f"{query} {' '.join(terms)}"
            p = r.run(scope, expanded, vector_text, keyword=True, vector=False, operator="or", depth=depth)
            runs.append((FEEDBACK_WEIGHT, fuse(p.lanes, 0.0)))
            queries.append(expanded)
            pool = ranked(combine(runs).values())[:RERANK_POOL]
            missing = [c.chunk_id for c in pool if c.chunk_id not in texts]
            texts.update({d.chunk_id: d.text for d in r.index.get_chunks(scope.org, missing)})
    merged = combine(runs)
    if r.reranker is None or not model_rerank(r.reranker, query, pool, texts):
        rerank(query, pool, texts)
    for c in pool:
        merged[c.chunk_id] = c
    return Plan(merged, queries)


def model_rerank(reranker: Reranker, query: str, pool: list[Candidate], texts: dict[str, str]) -> bool:
    """A configured reranking model orders the pool (its min-max-normalised score, weight
    MODEL_RERANK_WEIGHT, on top of the max-normalised fused score). False when the model is
    unavailable: the caller falls back to the offline rerank rather than failing the query."""
    if not pool:
        return True
    try:
        ranked_ = reranker.rerank(query, [texts.get(c.chunk_id, "") for c in pool])
    except StoreUnavailable:
        return False
    scores = {r.index: r.score for r in ranked_ if 0 <= r.index < len(pool)}
    if not scores:
        return False
    lo, hi = min(scores.values()), max(scores.values())
    top_fused = max(c.score for c in pool) or 1.0
    for i, c in enumerate(pool):
        model = (scores[i] - lo) / (hi - lo) if i in scores and hi > lo else (1.0 if i in scores else 0.0)
        c.score = c.score / top_fused + MODEL_RERANK_WEIGHT * model
    return True


def _stem(word: str) -> str:
    """A crude stem (6-letter prefix): enough to match "infections"/"infection" inside one pool."""
    return word.lower()[:6]


def rerank(query: str, pool: list[Candidate], texts: dict[str, str]) -> None:
    """Fused score (max-normalised) + RERANK_WEIGHT x best-sentence coverage of the query, in place.

    Coverage = the share of the query's term weight (idf within the pool) that one sentence of the
    chunk holds. A chunk that states the answer tends to hold the query's rare terms in one
    sentence; one that merely shares vocabulary spreads them out.
    """
    terms = {_stem(t) for t in content_terms(query)}
    if not terms or not pool:
        return
    if sum(len(texts.get(c.chunk_id, "")) for c in pool) < MIN_PASSAGE_CHARS * len(pool):
        # Short chunks (conversation turns, notes): the chunk is about one sentence long, so
        # coverage only repeats the keyword lane; on LoCoMo it cost 1-2 points of R@10.
        return
    split = {c.chunk_id: sentences(texts.get(c.chunk_id, "")) for c in pool}
    bags = {cid: [{_stem(w) for w in _WORD.findall(s)} for s in sents] for cid, sents in split.items()}
    df: Counter[str] = Counter()
    for sents in bags.values():
        df.update(set().union(*sents) & terms if sents else set())
    idf = {t: max(0.0, math.log((len(pool) + 1) / (df[t] + 0.5))) for t in terms}
    total = sum(idf.values()) or 1.0
    top_fused = max(c.score for c in pool) or 1.0
    for c in pool:
        best = max((sum(idf[t] for t in terms if t in bag) for bag in bags[c.chunk_id]), default=0.0)
        c.score = c.score / top_fused + RERANK_WEIGHT * best / total
