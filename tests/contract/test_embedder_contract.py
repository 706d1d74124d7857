"""Contract of the Embedder port, run against every embedder that can run here (real models, no fakes)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxstore.adapters.models.local_embedder import CachedEmbedder, LocalEmbedder
from ctxstore.ports.embedder import Embedder

_LOCAL = LocalEmbedder(precision="fp32")
_LOCAL_INT8 = LocalEmbedder(precision="int8")

EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "local-minilm": lambda: _LOCAL,
    "local-minilm-cached": lambda: CachedEmbedder(_LOCAL, max_entries=16),
    "local-minilm-int8": lambda: _LOCAL_INT8,
}
# How close each embedder's query vectors must be to the float32 MiniLM reference recorded below.
REFERENCE_MIN_COSINE = {
    "sentence-transformers/all-MiniLM-L6-v2": 0.9999,
    "sentence-transformers/all-MiniLM-L6-v2:int8": 0.98,
}


@pytest.fixture(params=sorted(EMBEDDERS))
def embedder(request: pytest.FixtureRequest) -> Embedder:
    return EMBEDDERS[request.param]()


def _cos(a: Any, b: Any) -> float:
    return float(np.dot(a, b))


def test_identity(embedder: Embedder) -> None:
    assert embedder.model_id in REFERENCE_MIN_COSINE
    assert embedder.dim == 384


def test_shape_dtype_and_unit_norms(embedder: Embedder) -> None:
    texts = ["A short sentence.", "Another one, a little longer than the first.", "x", ""]
    out = embedder.embed_documents(texts)
    assert out.shape == (4, embedder.dim) and out.dtype == np.float32
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    q = embedder.embed_query("what is a sentence?")
    assert q.shape == (embedder.dim,) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


def test_empty_input_list(embedder: Embedder) -> None:
    out = embedder.embed_documents([])
    assert out.shape == (0, embedder.dim) and out.dtype == np.float32


def test_deterministic_and_independent_of_batching(embedder: Embedder) -> None:
    texts = [f"Sentence number {i} talks about topic {i % 7}." for i in range(40)]
    a = embedder.embed_documents(texts)
    b = embedder.embed_documents(texts)
    np.testing.assert_array_equal(a, b)
    alone = embedder.embed_documents([texts[5]])[0]  # padded differently in a batch of one
    assert _cos(alone, a[5]) > 0.9999
    dup = embedder.embed_documents([texts[0], texts[1], texts[0]])
    np.testing.assert_array_equal(dup[0], dup[2])


def test_semantic_sanity(embedder: Embedder) -> None:
    base, paraphrase, unrelated = embedder.embed_documents(
        [
            "The cat sat on the mat.",
            "A cat was sitting on the rug.",
            "Quarterly revenue rose because of strong cloud sales.",
        ]
    )
    assert _cos(base, paraphrase) > _cos(base, unrelated) + 0.3
    query = embedder.embed_query("How do vaccines train the immune system?")
    docs = embedder.embed_documents(
        [
            "Vaccines expose the immune system to an antigen so it learns to recognise the pathogen.",
            "The stock market closed higher on Friday after a volatile week.",
        ]
    )
    assert _cos(query, docs[0]) > _cos(query, docs[1])


def test_long_input_is_truncated_not_rejected(embedder: Embedder) -> None:
    long_text = "word " * 5000
    out = embedder.embed_documents([long_text, "short"])
    assert out.shape == (2, embedder.dim) and np.all(np.isfinite(out))


def test_concurrent_callers_share_one_model(embedder: Embedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = ["alpha particles", "beta decay", "alpha particles", "gamma rays"] * 3
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(embedder.embed_query, texts))
    for i, text in enumerate(texts):
        assert _cos(results[i], results[texts.index(text)]) > 0.9999


def test_query_vectors_match_the_recorded_reference(embedder: Embedder) -> None:
    """Speed changes to the runtime (threads, spinning, padding) must not move the vectors: 300 SciFact
    queries against vectors recorded before those changes (float16, tests/contract/data)."""
    queries = Path(__file__).resolve().parents[3] / "shared" / "data" / "beir_scifact" / "queries.jsonl"
    assert queries.exists(), "../shared/data/beir_scifact is part of the test material (MANIFEST.md)"
    reference = np.load(Path(__file__).parent / "data" / "minilm_scifact_queries_300.npy").astype(np.float32)
    with queries.open(encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(len(reference)), f, strict=False)]
    got = np.stack([embedder.embed_query(t) for t in texts])
    cos = (got * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
    assert float(cos.min()) >= REFERENCE_MIN_COSINE[embedder.model_id]


def test_int8_ranks_real_documents_like_float32() -> None:
    """The int8 graph is the same model: for 50 SciFact queries over 300 abstracts, its top 10 is mostly
    float32's top 10 (retrieval quality of both: docs/benchmarks.md)."""
    data = Path(__file__).resolve().parents[3] / "shared" / "data" / "beir_scifact"
    assert data.exists(), "../shared/data/beir_scifact is part of the test material (MANIFEST.md)"
    with (data / "corpus.jsonl").open(encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for _, line in zip(range(300), f, strict=False)]
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for _, line in zip(range(50), f, strict=False)]
    tops = []
    for e in (_LOCAL, _LOCAL_INT8):
        d = e.embed_documents(docs)
        q = np.stack([e.embed_query(t) for t in queries])
        tops.append(np.argsort(-(q @ d.T), axis=1)[:, :10])
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(*tops, strict=True)])
    assert overlap >= 0.8


def test_unknown_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="precision"):
        LocalEmbedder(precision="int4")  # type: ignore[arg-type]
