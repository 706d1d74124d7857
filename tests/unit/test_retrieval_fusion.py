"""Fusion, routing and rerank rules of retrieval/ (pure functions)."""

from __future__ import annotations

from ctxstore.ports.search_index import Hit
from ctxstore.retrieval.fusion import Candidate, LaneHits, combine, fuse, lane_hits, ranked
from ctxstore.retrieval.signals import choose_alpha, route
from ctxstore.retrieval.thinking import clauses, feedback_terms, rerank


def _lane(lane: str, scores: dict[str, float]) -> LaneHits:
    return LaneHits("knowledge", lane, [Hit(k, k, "", v) for k, v in scores.items()])


def test_small_lanes_divide_by_the_best_score() -> None:
    out = fuse([_lane("keyword", {"a": 10.0, "b": 5.0}), _lane("vector", {"b": 0.8, "c": 0.4})], 0.5)
    assert out["a"].score == 0.5 and out["b"].score == 0.25 + 0.5 and out["c"].score == 0.25
    assert [c.chunk_id for c in ranked(out.values())] == ["b", "a", "c"]


def test_large_lanes_use_clipped_z_scores() -> None:
    kw = {f"k{i}": float(i) for i in range(20)}  # mean 9.5
    out = fuse([_lane("keyword", kw)], 0.0)
    assert out["k0"].score == 0.0 and out["k9"].score == 0.0  # at or below the mean: nothing
    assert out["k19"].score > out["k15"].score > out["k10"].score > 0
    # bunched cosines no longer add near-uniform mass: only above-average hits count
    vec = {f"k{i}": 0.50 + 0.001 * i for i in range(20)}
    mixed = fuse([_lane("keyword", kw), _lane("vector", vec)], 0.5)
    assert mixed["k5"].score == 0.0


def test_a_complete_lane_counts_the_candidates_it_did_not_match_as_zeros() -> None:
    """One keyword hit among 100 vector hits: the keyword lane matched nothing else, so its hit stands
    far above the zeros of every other candidate, not at 1.0 beside vector z-scores of 3 and more."""
    vec = {f"v{i}": 0.30 + 0.002 * i + (0.1 if i >= 95 else 0.0) for i in range(100)}  # a few strong leaders
    vec["token"] = 0.31
    kw = LaneHits("knowledge", "keyword", [Hit("token", "token", "", 7.5)], complete=True)
    vector = LaneHits("knowledge", "vector", [Hit(k, k, "", v) for k, v in vec.items()], complete=False)
    out = ranked(fuse([kw, vector], 0.4).values())
    assert out[0].chunk_id == "token"
    # The same hit from a lane cut at its limit (other chunks may match) keeps the best-score scale.
    cut = LaneHits("knowledge", "keyword", kw.hits, complete=False)
    assert ranked(fuse([cut, vector], 0.4).values())[0].chunk_id != "token"


def test_lane_hits_are_complete_when_fewer_than_asked() -> None:
    hits = [Hit("a", "a", "", 1.0)]
    assert lane_hits("knowledge", "keyword", hits, 100).complete
    assert not lane_hits("knowledge", "keyword", hits, 1).complete


def test_combine_weights_runs() -> None:
    a = {"x": Candidate("x", "x", "", "knowledge", score=1.0)}
    b = {"x": Candidate("x", "x", "", "knowledge", score=0.0), "y": Candidate("y", "y", "", "knowledge", score=1.0)}
    out = combine([(1.0, a), (1.0, b)])
    assert out["x"].score == 0.5 and out["y"].score == 0.5


def test_alpha_auto() -> None:
    assert choose_alpha("ERR_4471 in worker", 3, 3).alpha == 0.3
    assert choose_alpha('"exact words"', 3, 3).alpha == 0.3
    assert choose_alpha("invoices", 3, 3).alpha == 0.4
    assert choose_alpha("BRCA1 mutations raise the risk of breast and ovarian cancer", 3, 3).alpha == 0.5
    assert choose_alpha("how long do card payments take to settle in the account", 3, 3).alpha == 0.45
    assert choose_alpha("card payments settlement delays", 3, 3).alpha == 0.5
    assert choose_alpha("anything", 0, 3).alpha == 1.0 and choose_alpha("anything", 3, 0).alpha == 0.0


def test_route() -> None:
    c = [Candidate("a", "a", "", "knowledge", score=1.0), Candidate("b", "b", "", "knowledge", score=0.5)]
    assert route("q", c, ["a", "b", "c"], ["a", "b", "c"]).mode == "fast"  # agreement
    assert route("q", c, ["a", "x"], ["a", "y"]).mode == "fast"  # clear leader in both lanes
    assert route("q", c, ["x", "a"], ["y", "z"]).mode == "thinking"  # inconclusive
    assert route("q", [], [], []).mode == "thinking"
    compound = "when were invoices emailed, and how fast did card payments settle"
    assert route(compound, c, ["a", "b", "c"], ["a", "b", "c"]).mode == "thinking"
    assert clauses(compound) == ["when were invoices emailed", "how fast did card payments settle"]
    assert clauses("invoices emailed monthly") == []
    # Without a reranking model an inconclusive pass stays fast; compound queries still get sub-queries.
    assert route("q", c, ["x", "a"], ["y", "z"], reranker=False).mode == "fast"
    assert route("q", [], [], [], reranker=False).mode == "fast"
    assert route(compound, c, ["x"], ["y"], reranker=False).mode == "thinking"


def test_feedback_terms_prefer_top_specific_words() -> None:
    top = ["Metformin lowers hepatic glucose output in diabetic mice."]
    pool = [*top, "Glucose tolerance in mice fed a high fat diet.", "Insulin and glucose in mice."]
    terms = feedback_terms("diabetes drug", top, pool)
    assert terms[0] in {"metformin", "hepatic", "lowers", "output", "diabetic"}
    assert "glucose" not in terms[:3] and "mice" not in terms[:3]


def test_rerank_prefers_one_sentence_covering_the_query() -> None:
    spread = Candidate("s", "s", "", "knowledge", score=1.0)
    focused = Candidate("f", "f", "", "knowledge", score=0.9)
    texts = {
        "s": "Vitamin D was measured in the cohort. Separately, fracture rates were recorded in another study."
        + " Follow-up lasted five years, and the cohort was drawn from several regional clinics." * 5,
        "f": "We found that vitamin D supplements reduce fracture rates in older adults. The cohort was large."
        + " Follow-up lasted five years, and the cohort was drawn from several regional clinics." * 5,
    }
    rerank("vitamin D reduces fracture rates", [spread, focused], texts)
    assert focused.score > spread.score


def test_rerank_leaves_short_chunks_alone() -> None:
    a = Candidate("a", "a", "", "knowledge", score=1.0)
    b = Candidate("b", "b", "", "knowledge", score=0.9)
    texts = {"a": "Caroline went to the support group yesterday.", "b": "Vitamin D reduces fracture rates, we found."}
    rerank("vitamin D reduces fracture rates", [a, b], texts)
    assert (a.score, b.score) == (1.0, 0.9)
