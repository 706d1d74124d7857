"""Entity and relation extraction by an OpenAI-compatible chat endpoint (off unless configured).

One request per chunk asks for JSON `{entities: [{key, name, type}], relations: [{source,
target, predicate, context, confidence, temporal_details}]}`; the answer is checked and
anything malformed is dropped rather than stored (`adapters/extraction_answer.py`, shared with Bedrock).
"""

from __future__ import annotations

import httpx

from ctxstore.adapters.extraction_answer import PROMPT, parse_answer
from ctxstore.ports.extractor import Extraction

__all__ = ["PROMPT", "LlmExtractor", "parse_answer"]


class LlmExtractor:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport, trust_env=False
        )
        self._model = model

    def close(self) -> None:
        self._client.close()

    def extract(self, text: str) -> Extraction:
        r = self._client.post(
            "/chat/completions",
            json={
                "model": self._model,
                "temperature": 0,
                "response_format": {"type": "json_object"},
                "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": text}],
            },
        )
        r.raise_for_status()
        content = r.json()["choices"][0]["message"]["content"]
        return parse_answer(content)
