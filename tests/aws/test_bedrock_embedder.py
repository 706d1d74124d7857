"""Bedrock Titan Text Embeddings v2 adapter against request/response fixtures in Bedrock's documented format."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from ctxstore.adapters.aws.bedrock_embedder import TITAN_V2, BedrockEmbedder
from ctxstore.domain.errors import StoreUnavailable


def _client() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _answer(vector: list[float]) -> dict[str, Any]:
    raw = json.dumps({"embedding": vector, "inputTextTokenCount": 3}).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def _expect(stub: Stubber, text: str, vector: list[float], dim: int = 4) -> None:
    body = json.dumps({"inputText": text, "dimensions": dim, "normalize": True})
    params = {"modelId": TITAN_V2, "body": body, "contentType": "application/json", "accept": "application/json"}
    stub.add_response("invoke_model", _answer(vector), params)


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> tuple[BedrockEmbedder, Stubber]:
    client = _client()
    emb = BedrockEmbedder(dimensions=384, client=client, concurrency=1)
    monkeypatch.setattr(emb, "_dim", 4)  # small fixtures; the request carries whatever size is configured
    return emb, Stubber(client)


def test_one_request_per_text_in_titan_v2_format_and_unit_rows(stubbed: tuple[BedrockEmbedder, Stubber]) -> None:
    emb, stub = stubbed
    _expect(stub, "first chunk", [3.0, 4.0, 0.0, 0.0])
    _expect(stub, "second chunk", [0.0, 0.0, 1.0, 0.0])
    with stub:
        rows = emb.embed_documents(["first chunk", "second chunk"])
    stub.assert_no_pending_responses()
    assert rows.shape == (2, 4) and rows.dtype == np.float32
    np.testing.assert_allclose(rows[0], [0.6, 0.8, 0.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), [1.0, 1.0], rtol=1e-6)


def test_query_and_empty_and_overlong_inputs(stubbed: tuple[BedrockEmbedder, Stubber]) -> None:
    emb, stub = stubbed
    _expect(stub, "x" * 50_000, [1.0, 0.0, 0.0, 0.0])
    _expect(stub, " ", [0.0, 1.0, 0.0, 0.0])
    with stub:
        assert emb.embed_query("x" * 60_000).shape == (4,)  # cut at Titan's 50,000-character limit
        assert emb.embed_query("")[1] == 1.0  # Titan rejects empty input; a blank is sent instead
    assert emb.embed_documents([]).shape == (0, 4)


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        ("ThrottlingException", True),
        ("ServiceUnavailableException", True),
        ("ValidationException", False),
        ("AccessDeniedException", False),
    ],
)
def test_throttling_is_transient_and_other_errors_are_not(
    stubbed: tuple[BedrockEmbedder, Stubber], code: str, transient: bool
) -> None:
    emb, stub = stubbed
    stub.add_client_error(
        "invoke_model",
        service_error_code=code,
        http_status_code=429 if transient else 400,
        expected_params={"modelId": TITAN_V2, "body": ANY, "contentType": ANY, "accept": ANY},
    )
    with stub, pytest.raises(StoreUnavailable if transient else Exception) as info:
        emb.embed_query("a chunk")
    assert isinstance(info.value, StoreUnavailable) == transient


def test_wrong_dimension_answer_is_an_error(stubbed: tuple[BedrockEmbedder, Stubber]) -> None:
    emb, stub = stubbed
    _expect(stub, "a chunk", [1.0, 0.0])
    with stub, pytest.raises(ValueError, match="2 dimensions"):
        emb.embed_query("a chunk")


def test_only_titan_v2_sizes() -> None:
    with pytest.raises(ValueError):
        BedrockEmbedder(dimensions=512, client=_client())
    assert BedrockEmbedder(dimensions=1024, client=_client()).model_id == f"bedrock:{TITAN_V2}:1024"
