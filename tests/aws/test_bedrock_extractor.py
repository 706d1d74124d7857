"""Bedrock extractor (Converse) against request/response fixtures in Bedrock's documented format,
and through a real local ctxstore's graph step (ingest -> relations; throttling retried; bad answers dropped)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber

from ctxstore.adapters.aws.bedrock_extractor import BedrockExtractor
from ctxstore.adapters.models.extraction_answer import PROMPT
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.pipeline.jobs import queue_specs
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.pipeline.retry_policy import RetryPolicy
from tests.api.test_webhooks import pump
from tests.support.app import LocalApp, make_app

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
TEXT = "Ada Lovelace joined Acme Corp in March 2024."
ANSWER = {
    "entities": [
        {"key": "e1", "name": "Ada Lovelace", "type": "person"},
        {"key": "e2", "name": "Acme Corp", "type": "organization"},
    ],
    "relations": [
        {
            "source": "e1",
            "target": "e2",
            "predicate": "joined",
            "context": TEXT,
            "confidence": 0.9,
            "temporal_details": "in March 2024",
        },
        {"source": "e1", "target": "e9", "predicate": "knows"},  # unknown entity: dropped
    ],
}


def _client() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def converse_answer(text: str, stop: str = "end_turn") -> dict[str, Any]:
    """A Converse response as documented: output.message.content blocks, stopReason, usage, metrics."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {"inputTokens": 120, "outputTokens": 80, "totalTokens": 200},
        "metrics": {"latencyMs": 900},
    }


def _request(text: str = TEXT) -> dict[str, Any]:
    return {
        "modelId": MODEL,
        "system": [{"text": PROMPT}],
        "messages": [{"role": "user", "content": [{"text": text}]}],
        "inferenceConfig": {"maxTokens": 2048, "temperature": 0.0},
    }


@pytest.fixture
def stubbed() -> tuple[BedrockExtractor, Stubber]:
    client = _client()
    return BedrockExtractor(MODEL, client=client), Stubber(client)


def test_one_converse_call_with_the_json_instruction_parsed_into_port_types(
    stubbed: tuple[BedrockExtractor, Stubber],
) -> None:
    x, stub = stubbed
    stub.add_response("converse", converse_answer(json.dumps(ANSWER)), _request())
    with stub:
        out = x.extract(f"  {TEXT}\n")
    stub.assert_no_pending_responses()
    assert [(e.key, e.name, e.type) for e in out.entities] == [
        ("e1", "Ada Lovelace", "person"),
        ("e2", "Acme Corp", "organization"),
    ]
    [r] = out.relations
    assert (r.source, r.target, r.raw_predicate, r.canonical_predicate) == ("e1", "e2", "joined", "works_at")
    assert (r.context, r.confidence, r.temporal_details) == (TEXT, 0.9, "in March 2024")


def test_answer_in_a_markdown_fence_and_split_over_blocks(stubbed: tuple[BedrockExtractor, Stubber]) -> None:
    x, stub = stubbed
    raw = "```json\n" + json.dumps(ANSWER) + "\n```"
    resp = converse_answer("")
    resp["output"]["message"]["content"] = [{"text": raw[:40]}, {"text": raw[40:]}]
    stub.add_response("converse", resp, _request())
    with stub:
        assert len(x.extract(TEXT).relations) == 1


@pytest.mark.parametrize(
    ("answer", "stop"),
    [
        ("Sure! Ada works at Acme.", "end_turn"),  # prose, not JSON
        (json.dumps(ANSWER)[:60], "max_tokens"),  # cut at maxTokens
        ('["e1", "e2"]', "end_turn"),  # JSON, not the object asked for
        ("", "content_filtered"),
    ],
)
def test_malformed_answers_give_no_relations_and_a_warning(
    stubbed: tuple[BedrockExtractor, Stubber], caplog: pytest.LogCaptureFixture, answer: str, stop: str
) -> None:
    x, stub = stubbed
    stub.add_response("converse", converse_answer(answer, stop), _request())
    with stub, caplog.at_level(logging.WARNING, logger="ctxstore.extractor"):
        out = x.extract(TEXT)
    assert out.relations == [] and out.entities == []
    assert any(rec.levelno == logging.WARNING for rec in caplog.records)


def test_empty_text_makes_no_call(stubbed: tuple[BedrockExtractor, Stubber]) -> None:
    x, stub = stubbed
    with stub:  # no response queued: a call would raise
        assert x.extract("  \n").relations == []


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        ("ThrottlingException", True),
        ("ModelNotReadyException", True),
        ("ValidationException", False),
        ("AccessDeniedException", False),
    ],
)
def test_throttling_is_transient_and_other_errors_are_not(
    stubbed: tuple[BedrockExtractor, Stubber], code: str, transient: bool
) -> None:
    x, stub = stubbed
    stub.add_client_error(
        "converse", service_error_code=code, http_status_code=429 if transient else 400, expected_params=_request()
    )
    with stub, pytest.raises(StoreUnavailable if transient else ClientError):
        x.extract(TEXT)


def test_build_aws_wires_the_extractor_only_when_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws
    from tests.aws.moto_env import set_minimal_aws_env

    set_minimal_aws_env(monkeypatch)
    assert build_aws(Settings()).extractor is None  # the default "rules" is spaCy: local only
    monkeypatch.setenv("CTXSTORE_EXTRACTOR", "bedrock")
    with pytest.raises(ValueError, match="CTXSTORE_EXTRACTOR_MODEL_ID"):
        build_aws(Settings())
    monkeypatch.setenv("CTXSTORE_EXTRACTOR_MODEL_ID", MODEL)
    x = build_aws(Settings()).extractor
    assert isinstance(x, BedrockExtractor) and x._model == MODEL
    assert x._rt.meta.config.read_timeout == 60.0  # a generation outlasts the 10 s data-call timeout


# ---- through a real ctxstore: the graph step of ingestion ------------------------------------------
@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[LocalApp, Stubber]]:
    la = make_app(tmp_path / "data")
    fast = RetryPolicy(max_attempts=3, interval_s=0.01, backoff_rate=1.0, jitter=False)
    la.runner = LocalRunner(la.container.queue, queue_specs(la.services, ingest_retry=fast))
    client = _client()
    la.container.extractor = BedrockExtractor(MODEL, client=client)
    la.create_ready_database("acme")
    stub = Stubber(client)
    stub.activate()
    yield la, stub
    stub.deactivate()
    la.close()


def _ingest_and_wait(la: LocalApp, item_id: str) -> dict[str, Any]:
    items = [{"id": item_id, "title": "Note", "type": "note", "content": {"text": TEXT}}]
    r = la.client.post(
        "/context/ingest", data={"database": "acme", "app_knowledge": json.dumps(items)}, headers=la.headers()
    )
    assert r.status_code == 202, r.text

    def status() -> dict[str, Any]:
        s = la.client.get("/context/status", params={"database": "acme", "ids": item_id}, headers=la.headers())
        return s.json()["data"]["statuses"][0]  # type: ignore[no-any-return]

    pump(la, lambda: status()["indexing_status"] in ("completed", "errored"))
    return status()


def _triples(la: LocalApp) -> set[tuple[str, str, str]]:
    r = la.client.get("/context/relations", params={"database": "acme"}, headers=la.headers())
    assert r.status_code == 200, r.text
    return {
        (g["source"]["name"], ev["canonical_predicate"], g["target"]["name"])
        for g in r.json()["data"]["relations"]
        for ev in g["relations"]
    }


def test_ingested_item_gets_the_models_relations_after_a_throttled_call(app: tuple[LocalApp, Stubber]) -> None:
    la, stub = app
    req = {**_request(), "messages": ANY}  # the chunk text as the graph step hands it over
    stub.add_client_error(
        "converse", service_error_code="ThrottlingException", http_status_code=429, expected_params=req
    )
    stub.add_response("converse", converse_answer(json.dumps(ANSWER)), req)
    st = _ingest_and_wait(la, "doc1")
    stub.assert_no_pending_responses()  # the throttled graph step was retried (the E6001 path), not failed
    assert st["indexing_status"] == "completed" and st["error_code"] == ""
    assert _triples(la) == {("Ada Lovelace", "works_at", "Acme Corp")}


def test_a_malformed_answer_completes_the_item_without_relations(app: tuple[LocalApp, Stubber]) -> None:
    la, stub = app
    stub.add_response("converse", converse_answer("I cannot help with that."), {**_request(), "messages": ANY})
    st = _ingest_and_wait(la, "doc2")
    stub.assert_no_pending_responses()
    assert st["indexing_status"] == "completed" and st["error_code"] == ""
    assert _triples(la) == set()
