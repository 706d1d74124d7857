"""Embedder on Amazon Bedrock: Titan Text Embeddings v2 (one InvokeModel call per text).

Titan v2 embeds one input per request: body ``{"inputText", "dimensions", "normalize": true}``, answer
``{"embedding": [...], "inputTextTokenCount": n}``. Its input limit is 8,192 tokens / 50,000 characters;
chunks are far below that, so longer texts are cut at the character limit rather than refused.
Throttling and service faults raise StoreUnavailable, which the pipeline retries as E6001.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws.faults import install as map_faults

TITAN_V2 = "amazon.titan-embed-text-v2:0"
MAX_CHARS = 50_000
# Bedrock's own transient codes, beside the shared throttling/5xx/network set (adapters/aws/faults.py).
_TRANSIENT = frozenset({"ModelNotReadyException", "ModelTimeoutException"})


class BedrockEmbedder:
    def __init__(
        self, model_id: str = TITAN_V2, *, dimensions: int = 384, client: Any = None, concurrency: int = 4
    ) -> None:
        if dimensions not in (256, 384, 1024):
            raise ValueError("Titan Text Embeddings v2 supports 256, 384 or 1024 dimensions")
        self._model = model_id
        self._dim = dimensions
        self._rt = map_faults(client or make_client("bedrock-runtime"), extra=_TRANSIENT)
        self._concurrency = max(1, concurrency)

    @property
    def model_id(self) -> str:
        return f"bedrock:{self._model}:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        if len(texts) == 1 or self._concurrency == 1:
            rows = [self._one(t) for t in texts]
        else:  # one request per text: a few in flight keep a batch's latency near one call's
            with ThreadPoolExecutor(min(self._concurrency, len(texts))) as pool:
                rows = list(pool.map(self._one, texts))
        return np.stack(rows)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._one(text)

    def _one(self, text: str) -> npt.NDArray[np.float32]:
        body = {"inputText": text[:MAX_CHARS] or " ", "dimensions": self._dim, "normalize": True}
        resp = self._rt.invoke_model(
            modelId=self._model, body=json.dumps(body), contentType="application/json", accept="application/json"
        )
        vector = np.asarray(json.loads(resp["body"].read())["embedding"], dtype=np.float32)
        if vector.shape != (self._dim,):
            raise ValueError(f"Bedrock returned {vector.shape[0]} dimensions, expected {self._dim}")
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else vector
