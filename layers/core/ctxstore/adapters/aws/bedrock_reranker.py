"""Reranker on Amazon Bedrock: the Agent Runtime Rerank API (Amazon Rerank 1.0, Cohere Rerank 3.5).

One call ranks up to 1,000 inline text passages against one query; the answer lists
{index, relevanceScore} best first, paged by nextToken. Passages are cut at the API's 32,000
characters; empty ones are sent as a blank (the API refuses empty text) and rank last in practice.
Throttling and service faults raise StoreUnavailable so the caller can keep its own order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.ports.reranker import Ranked

MAX_SOURCES = 1000
MAX_CHARS = 32_000
# Agent Runtime's own transient codes, beside the shared throttling/5xx/network set (adapters/aws/faults.py).
_TRANSIENT = frozenset({"BadGatewayException", "DependencyFailedException", "ServiceQuotaExceededException"})


class BedrockReranker:
    def __init__(self, model: str, *, client: Any = None, region: str | None = None) -> None:
        """model: a reranking model ARN, or a model id (e.g. amazon.rerank-v1:0) in the client's region."""
        self._rt = map_faults(client or make_client("bedrock-agent-runtime", region=region), extra=_TRANSIENT)
        if model.startswith("arn:"):
            self._arn = model
        elif model:
            meta = self._rt.meta
            self._arn = f"arn:{meta.partition}:bedrock:{meta.region_name}::foundation-model/{model}"
        else:
            raise ValueError("the Bedrock reranker needs a model ARN or id")

    @property
    def model_arn(self) -> str:
        return self._arn

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[Ranked]:
        if not texts:
            return []
        if len(texts) > MAX_SOURCES:
            raise ValueError(f"at most {MAX_SOURCES} passages per rerank call, got {len(texts)}")
        n = len(texts) if top_n is None else max(1, min(top_n, len(texts)))
        params: dict[str, Any] = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query[:MAX_CHARS] or " "}}],
            "sources": [_inline(t) for t in texts],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {"numberOfResults": n, "modelConfiguration": {"modelArn": self._arn}},
            },
        }
        ranked: list[Ranked] = []
        seen: set[int] = set()
        while True:
            resp = self._rt.rerank(**params)
            for r in resp.get("results") or []:
                i = r.get("index")
                if isinstance(i, int) and 0 <= i < len(texts) and i not in seen:  # never trust an index blindly
                    seen.add(i)
                    ranked.append(Ranked(index=i, score=float(r.get("relevanceScore", 0.0))))
            token = resp.get("nextToken")
            if not token or len(ranked) >= n:
                break
            params["nextToken"] = token
        ranked.sort(key=lambda x: -x.score)  # documented best first; sorted again so pages merge correctly
        return ranked[:n]


def _inline(text: str) -> dict[str, Any]:
    document = {"type": "TEXT", "textDocument": {"text": text[:MAX_CHARS] or " "}}
    return {"type": "INLINE", "inlineDocumentSource": document}
