"""Bedrock reranker (Agent Runtime Rerank) against request/response fixtures in the documented format."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber

from ctxstore.adapters.aws.bedrock_reranker import MAX_CHARS, BedrockReranker
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.reranker import Ranked, Reranker

ARN = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
PASSAGES = ["Paris is the capital of France.", "Bananas are yellow.", "France borders Spain."]


def _client() -> Any:
    return boto3.client(
        "bedrock-agent-runtime", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x"
    )


def _request(texts: list[str], n: int, query: str = "capital of France", arn: str = ARN) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [
            {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}} for t in texts
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {"numberOfResults": n, "modelConfiguration": {"modelArn": arn}},
        },
    }


def _results(*pairs: tuple[int, float], token: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"results": [{"index": i, "relevanceScore": s} for i, s in pairs]}
    if token:
        out["nextToken"] = token
    return out


@pytest.fixture
def stubbed() -> tuple[BedrockReranker, Stubber]:
    client = _client()
    return BedrockReranker(ARN, client=client), Stubber(client)


def test_inline_text_sources_and_results_by_index_best_first(stubbed: tuple[BedrockReranker, Stubber]) -> None:
    rr, stub = stubbed
    stub.add_response("rerank", _results((0, 0.93), (2, 0.41), (1, 0.002)), _request(PASSAGES, 3))
    with stub:
        ranked = rr.rerank("capital of France", PASSAGES)
    stub.assert_no_pending_responses()
    assert ranked == [Ranked(0, 0.93), Ranked(2, 0.41), Ranked(1, 0.002)]
    port: Reranker = rr  # the adapter satisfies the port
    assert port is rr


def test_top_n_is_number_of_results_and_clamped(stubbed: tuple[BedrockReranker, Stubber]) -> None:
    rr, stub = stubbed
    stub.add_response("rerank", _results((0, 0.9)), _request(PASSAGES, 1))
    stub.add_response("rerank", _results((2, 0.5), (0, 0.9), (1, 0.1)), _request(PASSAGES, 3))
    with stub:
        assert rr.rerank("capital of France", PASSAGES, top_n=1) == [Ranked(0, 0.9)]
        assert [r.index for r in rr.rerank("capital of France", PASSAGES, top_n=50)] == [0, 2, 1]  # re-sorted
    assert rr.rerank("q", []) == []


def test_pages_are_followed_and_bad_indexes_dropped(stubbed: tuple[BedrockReranker, Stubber]) -> None:
    rr, stub = stubbed
    stub.add_response("rerank", _results((1, 0.8), (7, 0.99), token="t1"), _request(PASSAGES, 3))
    stub.add_response("rerank", _results((1, 0.8), (0, 0.3)), {**_request(PASSAGES, 3), "nextToken": "t1"})
    with stub:
        assert rr.rerank("capital of France", PASSAGES) == [Ranked(1, 0.8), Ranked(0, 0.3)]
    stub.assert_no_pending_responses()


def test_empty_and_overlong_texts_fit_the_api_limits(stubbed: tuple[BedrockReranker, Stubber]) -> None:
    rr, stub = stubbed
    stub.add_response("rerank", _results((0, 0.5), (1, 0.1)), _request([" ", "y" * MAX_CHARS], 2, query="q"))
    with stub:
        assert len(rr.rerank("q", ["", "y" * (MAX_CHARS + 10)])) == 2
    with pytest.raises(ValueError, match="1000"):
        rr.rerank("q", ["x"] * 1001)


def test_model_id_becomes_the_foundation_model_arn_of_the_clients_region() -> None:
    client = _client()
    rr = BedrockReranker("cohere.rerank-v3-5:0", client=client)
    assert rr.model_arn == "arn:aws:bedrock:us-west-2::foundation-model/cohere.rerank-v3-5:0"
    with Stubber(client) as stub:
        stub.add_response("rerank", _results((0, 0.7)), _request(["a"], 1, query="q", arn=rr.model_arn))
        assert rr.rerank("q", ["a"]) == [Ranked(0, 0.7)]
    with pytest.raises(ValueError):
        BedrockReranker("", client=client)


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        ("ThrottlingException", True),
        ("InternalServerException", True),
        ("ValidationException", False),
        ("AccessDeniedException", False),
    ],
)
def test_throttling_is_transient_and_other_errors_are_not(
    stubbed: tuple[BedrockReranker, Stubber], code: str, transient: bool
) -> None:
    rr, stub = stubbed
    stub.add_client_error(
        "rerank",
        service_error_code=code,
        http_status_code=429 if transient else 400,
        expected_params={"queries": ANY, "sources": ANY, "rerankingConfiguration": ANY},
    )
    with stub, pytest.raises(StoreUnavailable if transient else ClientError):
        rr.rerank("capital of France", PASSAGES)


def test_build_aws_wires_the_reranker_only_when_a_model_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime.aws import build_aws
    from tests.aws.moto_env import set_minimal_aws_env

    set_minimal_aws_env(monkeypatch)
    assert build_aws(Settings()).reranker is None
    monkeypatch.setenv("CTXSTORE_RERANK_MODEL", "amazon.rerank-v1:0")
    rr = build_aws(Settings()).reranker
    assert isinstance(rr, BedrockReranker)
    assert rr._arn == "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0"


def test_template_passes_the_rerank_model_to_the_query_function_only() -> None:
    from tests.aws.moto_env import template

    tpl = template()
    with_model = [
        name
        for name, res in tpl["Resources"].items()
        if res["Type"] == "AWS::Serverless::Function"
        and "CTXSTORE_RERANK_MODEL" in res["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert with_model == ["ApiQueryFunction"]
