"""The optional self-hosted reranker (CTXSTORE_RERANK_URL) against a local fake of the `/rerank` API.

The fake speaks both request shapes (text-embeddings-inference and Infinity/Cohere) and scores a passage
by a word it is told to prefer, so a test knows which order a real model would have to produce.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.models.http_reranker import HttpReranker
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.reranker import Ranked
from tests.support.app import make_app


class FakeRerankServer:
    def __init__(self, favourite: str) -> None:
        self.favourite = favourite
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if fake.status != 200:
                    self.send_response(fake.status)
                    self.end_headers()
                    return
                passages = body.get("texts", body.get("documents"))
                scores = [
                    (i, (1.0 if fake.favourite in p.lower() else 0.0) + 0.001 * i) for i, p in enumerate(passages)
                ]
                scores.sort(key=lambda x: -x[1])
                if "texts" in body:  # text-embeddings-inference
                    out: Any = [{"index": i, "score": s} for i, s in scores]
                else:  # Infinity / Cohere
                    n = body.get("top_n") or len(scores)
                    out = {"object": "rerank", "results": [{"index": i, "relevance_score": s} for i, s in scores[:n]]}
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake() -> Iterator[FakeRerankServer]:
    server = FakeRerankServer("zebra")
    yield server
    server.close()


PASSAGES = ["Horses run fast.", "A zebra has stripes.", "Lions hunt at night."]


@pytest.mark.parametrize("api", ["tei", "infinity"])
def test_both_request_shapes(fake: FakeRerankServer, api: str) -> None:
    r = HttpReranker(fake.url, api=api, model="bge-reranker-base", api_key="k")  # type: ignore[arg-type]
    ranked = r.rerank("which animal has stripes", PASSAGES, top_n=2)
    assert [x.index for x in ranked] == [1, 2] and isinstance(ranked[0], Ranked)
    req = fake.requests[-1]
    assert req["path"] == "/rerank" and req["auth"] == "Bearer k"
    if api == "tei":
        assert req["body"]["texts"] == PASSAGES and req["body"]["truncate"] is True
    else:
        assert req["body"]["documents"] == PASSAGES and req["body"]["model"] == "bge-reranker-base"
        assert req["body"]["top_n"] == 2
    r.close()


def test_failures_are_unavailable_so_thinking_falls_back(fake: FakeRerankServer) -> None:
    r = HttpReranker(fake.url)
    fake.status = 503
    with pytest.raises(StoreUnavailable):
        r.rerank("q", PASSAGES)
    fake.status = 200
    fake.close()
    with pytest.raises(StoreUnavailable):
        r.rerank("q", PASSAGES)
    r.close()


def test_thinking_queries_are_ordered_by_the_configured_reranker(tmp_path: Path, fake: FakeRerankServer) -> None:
    la = make_app(tmp_path / "data", rerank_url=fake.url, rerank_api="tei")
    try:
        la.create_ready_database("zoo")
        notes = [
            {"id": f"n{i}", "title": f"Animal {i}", "type": "note", "content": {"text": t}}
            for i, t in enumerate(
                ["Stripes and speed: the horse has none.", "Animals with stripes include the zebra.", "Stripes."]
            )
        ]
        r = la.client.post(
            "/context/ingest", data={"database": "zoo", "app_knowledge": json.dumps(notes)}, headers=la.headers()
        )
        assert r.status_code == 202
        la.drain()
        body = {"database": "zoo", "query": "animals with stripes", "max_results": 3, "graph_context": False}
        thinking = la.client.post("/query", json={**body, "mode": "thinking"}, headers=la.headers()).json()["data"]
        assert fake.requests, "thinking did not call the reranker"
        assert thinking["chunks"][0]["id"] == "n1"
        before = len(fake.requests)
        la.client.post("/query", json={**body, "mode": "fast"}, headers=la.headers())
        assert len(fake.requests) == before  # fast never pays for it
        fake.status = 500  # a failing reranker does not fail the query
        r = la.client.post("/query", json={**body, "mode": "thinking"}, headers=la.headers())
        assert r.status_code == 200 and r.json()["data"]["chunks"]
    finally:
        la.close()
