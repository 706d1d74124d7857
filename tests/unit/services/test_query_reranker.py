"""A configured Reranker (Container.reranker) orders the thinking pool; unavailable -> offline rerank."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.reranker import Ranked
from tests.support.app import LocalApp, make_app


class PrefersWord:
    """Ranks passages holding `word` first (a stand-in for a cross-encoder)."""

    def __init__(self, word: str, fail: bool = False) -> None:
        self.word, self.fail, self.calls = word, fail, 0

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[Ranked]:
        self.calls += 1
        if self.fail:
            raise StoreUnavailable("throttled")
        scored = [Ranked(i, 1.0 if self.word in t else 0.0) for i, t in enumerate(texts)]
        return sorted(scored, key=lambda r: -r.score)[: top_n or len(scored)]


@pytest.fixture(scope="module")
def la(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    app = make_app(Path(tmp_path_factory.mktemp("rr")) / "data")
    app.create_ready_database("acme")
    notes = [
        {"id": "a", "title": "A", "type": "note", "content": {"text": "Harbour lighthouse maintenance log."}},
        {"id": "b", "title": "B", "type": "note", "content": {"text": "Lighthouse keeper rota: zebra shift."}},
    ]
    app.client.post(
        "/context/ingest", headers=app.headers(), data={"database": "acme", "app_knowledge": json.dumps(notes)}
    )
    app.drain()
    yield app
    app.close()


def _ids(la: LocalApp, mode: str) -> list[str]:
    r = la.client.post(
        "/query",
        json={"database": "acme", "query": "harbour lighthouse maintenance", "mode": mode},
        headers=la.headers(),
    )
    assert r.status_code == 200, r.text
    return [c["id"] for c in r.json()["data"]["chunks"]]


def test_model_orders_the_thinking_pool_only(la: LocalApp) -> None:
    assert _ids(la, "thinking")[0] == "a"
    model = PrefersWord("zebra")
    la.container.reranker = model
    try:
        assert _ids(la, "thinking")[0] == "b" and model.calls == 1
        assert _ids(la, "fast")[0] == "a" and model.calls == 1  # fast mode never calls it
        la.container.reranker = PrefersWord("zebra", fail=True)
        assert _ids(la, "thinking")[0] == "a"  # throttled: the offline rerank answers
    finally:
        la.container.reranker = None
