"""infer=true with CTXSTORE_INFERRER=llm: memories come from an OpenAI-compatible endpoint (a local fake here)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.models.llm_inferrer import parse_memories
from tests.support.app import LocalApp, make_app


class FakeChat:
    """Answers /chat/completions from a script: (status, content) per call; the last entry repeats."""

    def __init__(self) -> None:
        self.script: list[tuple[int, str]] = []
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                status, content = fake.script[min(len(fake.requests), len(fake.script)) - 1]
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    fake = FakeChat()
    yield fake
    fake.server.shutdown()


@pytest.fixture
def la(tmp_path: Path, chat: FakeChat) -> Iterator[LocalApp]:
    app = make_app(
        tmp_path, inferrer="llm", llm_base_url=chat.url, llm_model="tiny-chat", llm_api_key="sk-test", extractor="none"
    )
    app.create_ready_database("acme")
    yield app
    app.close()


def _remember(la: LocalApp, mem_id: str) -> None:
    r = la.client.post(
        "/context/ingest",
        headers=la.headers(),
        data={
            "database": "acme",
            "type": "memory",
            "memories": json.dumps(
                [
                    {
                        "id": mem_id,
                        "user_name": "Kim",
                        "infer": True,
                        "user_assistant_pairs": [{"user": "Trains beat planes for me.", "assistant": "Noted."}],
                    }
                ]
            ),
        },
    )
    assert r.status_code == 202, r.text


def _settle(la: LocalApp, mem_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.time() + timeout_s
    while True:
        la.drain()
        r = la.client.get("/context/status", params={"database": "acme", "ids": mem_id}, headers=la.headers())
        [status] = r.json()["data"]["statuses"]
        if status["indexing_status"] in ("completed", "errored") or time.time() > deadline:
            return dict(status)
        time.sleep(0.2)


def _inspect(la: LocalApp, mem_id: str) -> dict[str, Any]:
    r = la.client.get("/context/inspect", params={"database": "acme", "id": mem_id}, headers=la.headers())
    out: dict[str, Any] = r.json()["data"]
    return out


def test_inferred_memories_come_from_the_model_after_a_transient_failure(la: LocalApp, chat: FakeChat) -> None:
    chat.script = [(503, ""), (200, json.dumps({"memories": ["Kim prefers travelling by train over flying."]}))]
    _remember(la, "m1")
    assert _settle(la, "m1")["indexing_status"] == "completed"
    assert len(chat.requests) == 2  # the 503 was retried (E6001 path), not fatal
    sent = chat.requests[-1]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer sk-test"
    assert sent["body"]["model"] == "tiny-chat"
    assert (
        "Kim" in sent["body"]["messages"][1]["content"]
        and "Trains beat planes" in sent["body"]["messages"][1]["content"]
    )
    assert "Kim prefers travelling by train over flying." in _inspect(la, "m1")["inferred_content"]
    r = la.client.post(
        "/query",
        json={"database": "acme", "type": "memory", "query": "how does Kim like to travel", "mode": "fast"},
        headers=la.headers(),
    )
    assert any("travelling by train" in c["chunk_content"] for c in r.json()["data"]["chunks"])


def test_a_malformed_answer_keeps_nothing_and_the_memory_completes(la: LocalApp, chat: FakeChat) -> None:
    chat.script = [(200, "Sure! Kim likes trains.")]
    _remember(la, "m2")
    assert _settle(la, "m2")["indexing_status"] == "completed"
    assert not _inspect(la, "m2").get("inferred_content")


def test_parse_memories_accepts_fenced_json_and_drops_junk() -> None:
    assert parse_memories('```json\n{"memories": ["A.", "A.", 3, "  B  "]}\n```') == ["A.", "B"]
    assert parse_memories('{"facts": []}') == []
    assert parse_memories("[]") == []
