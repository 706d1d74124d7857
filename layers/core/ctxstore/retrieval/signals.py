"""Measurable per-query signals behind `alpha: "auto"` and `mode: "auto"`.

Both decisions look only at the query text and at the first (fast) retrieval pass, so they cost
nothing beyond what a fast query already does and can be explained in the response.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ctxstore.domain.stopwords import ENGLISH_STOPWORDS
from ctxstore.retrieval.fusion import Candidate

_WORD = re.compile(r"\w+", re.UNICODE)
# Tokens that name things exactly (codes, versions, snake_case, CamelCase, ALLCAPS): keyword territory.
_IDENTIFIER = re.compile(r"^(?=.*\d)\w+$|_|^[A-Z]{2,}\w*$|^[a-z]+[A-Z]\w*$")
# Clause boundaries: "?", ";" and a comma before and/then/or/but. Not a bare "and": "X and Y cause Z"
# is one claim, and splitting there cost SciFact nDCG@10.
CLAUSE_SPLIT = re.compile(r"[?;]|,\s*(?:and|then|or|but)\b")
_QUESTION = frozenset(
    {"what", "why", "how", "when", "where", "which", "who", "whom", "whose", "does", "did", "do", "is"}
)
# Content words: the search stop set plus the pronouns a question is phrased with.
_STOP = ENGLISH_STOPWORDS | {"i", "you", "he", "she", "we", "my", "your", "me"}


def content_terms(query: str) -> list[str]:
    return [w for w in (m.lower() for m in _WORD.findall(query)) if w not in _STOP]


@dataclass(frozen=True)
class AlphaChoice:
    alpha: float
    reason: str


def choose_alpha(query: str, keyword_hits: int, vector_hits: int) -> AlphaChoice:
    """Lower alpha (keywords) for exact-term queries, higher (vectors) for long natural-language ones."""
    if keyword_hits == 0 and vector_hits == 0:
        return AlphaChoice(0.5, "no hits in either lane")
    if keyword_hits == 0:
        return AlphaChoice(1.0, "no keyword match: vectors only")
    if vector_hits == 0:
        return AlphaChoice(0.0, "no vectors in scope: keywords only")
    raw = _WORD.findall(query)
    terms = content_terms(query)
    if '"' in query or (len(terms) <= 3 and any(_IDENTIFIER.search(w) for w in raw)):
        # Only short lookups: in a long claim a gene name or a number is one term among many, and
        # lowering alpha there cost SciFact 0.005 nDCG@10.
        return AlphaChoice(0.3, "exact identifiers or quoted text favour keywords")
    if len(terms) <= 2:
        return AlphaChoice(0.4, "short keyword-style query")
    if raw and raw[0].lower() in _QUESTION and len(terms) >= 5:
        # Measured on LoCoMo (1,535 questions over conversation turns): R@10 0.585 at alpha 0.6,
        # 0.599 at 0.5, 0.605 at 0.45: questions about one's own past hinge on names and events.
        return AlphaChoice(0.45, "long question: its names and events anchor the keyword lane")
    return AlphaChoice(0.5, "balanced")


@dataclass(frozen=True)
class Route:
    mode: str  # "fast" or "thinking"
    reason: str


def route(
    query: str,
    fused: Sequence[Candidate],
    keyword_top: Sequence[str],
    vector_top: Sequence[str],
    *,
    reranker: bool = True,
) -> Route:
    """Fast when the first pass is conclusive; thinking otherwise (the spec's default when in doubt).

    Conclusive = the two lanes agree on the best items (item overlap of their top 5 is 3 or more),
    or the fused leader is also a top-2 item of both lanes and leads the runner-up by 15 %.
    Queries with several clauses are multi-hop by construction and go to thinking.
    Without a reranking model (`reranker=False`) an inconclusive pass has nothing in thinking to settle
    it: the offline rerank measured no better than fast (SciFact, LoCoMo and held-out splits,
    docs/benchmarks.md), so only compound queries, which thinking splits into sub-queries, go there.
    """
    clauses = [c for c in CLAUSE_SPLIT.split(query) if len(content_terms(c)) >= 2]
    if len(clauses) >= 2 and len(content_terms(query)) >= 6:
        return Route("thinking", "several clauses: multi-query expansion")
    if not reranker:
        return Route("fast", "no reranking model configured: offline thinking measures no better than fast")
    if not fused:
        return Route("thinking", "no candidates in the first pass")
    overlap = len(set(keyword_top[:5]) & set(vector_top[:5]))
    if overlap >= 3:
        return Route("fast", f"keyword and vector lanes agree ({overlap} of top 5)")
    leader = fused[0]
    runner = fused[1].score if len(fused) > 1 else 0.0
    margin = (leader.score - runner) / leader.score if leader.score > 0 else 0.0
    if leader.item_id in keyword_top[:2] and leader.item_id in vector_top[:2] and margin >= 0.15:
        return Route("fast", f"clear leader in both lanes (margin {margin:.2f})")
    return Route("thinking", f"inconclusive first pass (lane overlap {overlap} of 5, margin {margin:.2f})")
