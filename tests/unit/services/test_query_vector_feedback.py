"""POST /query searches the vector lane a second time from the query vector moved toward the first pass's
top two chunks (retrieval/feedback.py), and only for a hybrid pass."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxstore.retrieval.feedback import FEEDBACK_BETA, FEEDBACK_DOCS
from tests.support.app import LocalApp, make_app


class RecordingIndex:
    """The real index, with the query vectors of its vector searches written down."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.vectors, self.narrow = inner, [], []

    def vector_search(self, org: str, flt: Any, vector: Any, limit: int, narrow: bool = False) -> Any:
        self.vectors.append(np.asarray(vector, dtype=np.float32))
        self.narrow.append(narrow)
        return self.inner.vector_search(org, flt, vector, limit=limit, narrow=narrow)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def la(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    app = make_app(Path(tmp_path_factory.mktemp("fb")) / "data")
    app.create_ready_database("acme")
    texts = [
        "Caroline went to an LGBTQ support group yesterday and it was powerful.",
        "The support group shared transgender stories.",
        "Melanie painted a lake at sunrise last week.",
        "Melanie ran a charity race for mental health.",
    ]
    notes = [{"id": f"n{i}", "text": t, "infer": False} for i, t in enumerate(texts)]
    r = app.client.post(
        "/context/ingest",
        headers=app.headers(),
        data={"database": "acme", "type": "memory", "memories": json.dumps(notes)},
    )
    assert r.status_code == 202, r.text
    app.drain()
    yield app
    app.close()


def _query(la: LocalApp, body: dict[str, Any]) -> tuple[list[str], list[np.ndarray], list[bool]]:
    recording = RecordingIndex(la.container.search_index)
    inner, la.container.search_index = la.container.search_index, recording  # type: ignore[assignment]
    try:
        r = la.client.post("/query", json={"database": "acme", "type": "memory", **body}, headers=la.headers())
    finally:
        la.container.search_index = inner
    assert r.status_code == 200, r.text
    return [c["id"] for c in r.json()["data"]["chunks"]], recording.vectors, recording.narrow


def test_a_hybrid_query_searches_vectors_again_from_the_moved_query(la: LocalApp) -> None:
    question = "When did Caroline go to the support group?"
    ids, vectors, narrow = _query(la, {"query": question, "mode": "fast"})
    assert ids and len(vectors) == 2
    assert narrow == [False, True]  # the second search may be run narrower (vector_cache.NARROW_BREADTH)
    idx, embedder = la.container.search_index, la.container.embedder
    assert idx is not None and embedder is not None
    query = embedder.embed_query(question)
    assert np.allclose(vectors[0], query, atol=1e-6)
    org = la.services.keys.authenticate(la.key).org
    stored = [d.vector for i in range(4) for d in idx.item_chunks(org, "acme", "", "memory", f"n{i}")]
    assert FEEDBACK_DOCS == 2 and len(stored) == 4
    # The second search's vector: the query plus beta times the mean of two stored chunks, normalised.
    candidates = []
    for a, b in itertools.combinations(stored, 2):
        moved = query + FEEDBACK_BETA * (np.asarray(a) + np.asarray(b)) / 2
        candidates.append(moved / np.linalg.norm(moved))
    assert any(np.allclose(vectors[1], c, atol=1e-5) for c in candidates)
    assert not np.allclose(vectors[1], query, atol=1e-3)


def test_keyword_only_and_vector_only_queries_search_vectors_at_most_once(la: LocalApp) -> None:
    _, vectors, _ = _query(la, {"query": "support group", "mode": "fast", "alpha": 0.0})
    assert len(vectors) <= 1
    _, vectors, _ = _query(la, {"query": "zzzqqq unmatched words", "mode": "fast"})  # no keyword hit: alpha 1
    assert len(vectors) == 1
