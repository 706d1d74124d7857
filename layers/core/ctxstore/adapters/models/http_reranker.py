"""Reranker over the `/rerank` API of a self-hosted rerank server, configured by URL.

Two request shapes are spoken, chosen by `api`:
- "tei": Hugging Face text-embeddings-inference, `POST {url}/rerank {"query", "texts", "truncate"}`,
  answering `[{"index", "score"}, ...]`;
- "infinity": Infinity (and any Cohere-compatible server), `POST {url}/rerank {"model", "query",
  "documents", "top_n", "return_documents"}`, answering `{"results": [{"index", "relevance_score"}, ...]}`.
Throttling (429), server errors, timeouts and unreadable answers raise StoreUnavailable: thinking then keeps
its offline rerank instead of failing the query (ports/reranker.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import httpx

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.reranker import Ranked

MAX_CHARS = 4000  # per passage: rerank models read ~512 tokens; servers reject or truncate longer inputs
RerankApi = Literal["tei", "infinity"]


class HttpReranker:
    def __init__(
        self,
        url: str,
        *,
        api: RerankApi = "tei",
        model: str = "",
        api_key: str = "",
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if api not in ("tei", "infinity"):
            raise ValueError(f"unknown rerank API {api!r}; known: tei, infinity")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport, trust_env=False
        )
        self._api = api
        self._model = model

    def close(self) -> None:
        self._client.close()

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[Ranked]:
        if not texts:
            return []
        passages = [t[:MAX_CHARS] for t in texts]
        body: dict[str, Any]
        if self._api == "tei":
            body = {"query": query, "texts": passages, "truncate": True, "return_text": False}
        else:
            body = {"query": query, "documents": passages, "return_documents": False}
            if self._model:
                body["model"] = self._model
            if top_n is not None:
                body["top_n"] = top_n
        try:
            r = self._client.post("/rerank", json=body)
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"rerank server unreachable: {exc}") from exc
        if r.status_code == 429 or r.status_code >= 500:
            raise StoreUnavailable(f"rerank server answered {r.status_code}")
        if r.status_code >= 400:
            raise StoreUnavailable(f"rerank server refused the request ({r.status_code}): {r.text[:200]}")
        try:
            ranked = self._parse(r.json(), len(passages))
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreUnavailable(f"unreadable rerank answer: {exc}") from exc
        ranked.sort(key=lambda x: -x.score)
        return ranked[:top_n] if top_n is not None else ranked

    def _parse(self, data: Any, n: int) -> list[Ranked]:
        rows = data if self._api == "tei" else data["results"]
        key = "score" if self._api == "tei" else "relevance_score"
        out = [Ranked(int(row["index"]), float(row[key])) for row in rows]
        if any(not 0 <= x.index < n for x in out):
            raise ValueError("an index outside the passages sent")
        return out
