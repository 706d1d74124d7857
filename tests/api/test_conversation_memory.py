"""A `user_assistant_pairs` memory is indexed one turn per chunk, each turn embedded with the turn before it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ctxstore.pipeline.ingest_steps import ingest_steps
from tests.support.app import LocalApp

PAIRS = [
    {"user": "Did you end up going to the pottery class in Porto?", "assistant": "Yes, last Saturday! I loved it."},
    {"user": "What did you make there?", "assistant": "A blue bowl for my sister."},
]


def _post_chat(local: LocalApp) -> None:
    r = local.client.post(
        "/context/ingest",
        data={
            "database": "acme",
            "type": "memory",
            "memories": json.dumps([{"id": "chat", "user_name": "Kim", "user_assistant_pairs": PAIRS}]),
        },
        headers=local.headers(),
    )
    assert r.status_code == 202, r.text


@pytest.fixture
def db(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme")
    _post_chat(local)
    local.drain()
    return local


def _chunks(la: LocalApp) -> list[Any]:
    idx = la.container.search_index
    assert idx is not None
    return idx.item_chunks("default", "acme", "", "memory", "chat")


def test_each_turn_is_its_own_chunk(db: LocalApp) -> None:
    assert [c.text for c in _chunks(db)] == [
        "Kim: Did you end up going to the pottery class in Porto?",
        "Assistant: Yes, last Saturday! I loved it.",
        "Kim: What did you make there?",
        "Assistant: A blue bowl for my sister.",
    ]


def test_a_turn_is_embedded_with_the_previous_turn(db: LocalApp) -> None:
    chunks = _chunks(db)
    embedder = db.container.embedder
    assert embedder is not None
    with_context, alone = embedder.embed_documents([f"{chunks[0].text}\n{chunks[1].text}", chunks[1].text])
    stored = np.asarray(chunks[1].vector)
    assert float(stored @ with_context) > 0.999
    assert float(stored @ alone) < 0.99  # the context really changed the vector
    first = embedder.embed_documents([chunks[0].text])[0]
    assert float(np.asarray(chunks[0].vector) @ first) > 0.999  # the first turn has no context


def test_query_returns_the_answering_turn_alone(db: LocalApp) -> None:
    r = db.client.post(
        "/query",
        json={"database": "acme", "type": "memory", "query": "When did Kim go to the pottery class?", "mode": "fast"},
        headers=db.headers(),
    )
    assert r.status_code == 200, r.text
    texts = [c["chunk_content"] for c in r.json()["data"]["chunks"]]
    # The reply names neither pottery nor a class; its vector carries the question it answers.
    assert "Assistant: Yes, last Saturday! I loved it." in texts[:2]


def test_step_functions_tasks_keep_the_context_between_parse_and_embed(local: LocalApp) -> None:
    """On AWS the chunks travel through a work file between the parse and embed tasks."""
    local.create_ready_database("acme")
    _post_chat(local)
    [job] = local.container.queue.claim("ingest", lease_s=60)
    steps = ingest_steps(local.services)
    event = {"org": job.org, "payload": job.payload}
    parsed = steps.parse(event)
    assert parsed["outcome"] == "continue" and parsed["chunks"] == 4
    steps.embed({**event, "work": parsed["work"], "batch": {"start": 0, "end": 4}})
    matrix = steps._load_batch(job.org, parsed["work"], 0)
    embedder = local.container.embedder
    assert embedder is not None
    [expected] = embedder.embed_documents([f"Kim: {PAIRS[0]['user']}\nAssistant: {PAIRS[0]['assistant']}"])
    assert float(matrix[1] @ expected) > 0.999
