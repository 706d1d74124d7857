"""A minimal client for an OpenAI-compatible `/chat/completions` endpoint asking for a JSON answer.

Shared by the optional LLM extractor and memory inferrer. Throttling (429), server errors and network
failures raise StoreUnavailable, the pipeline's transient (E6001, retried) path.
"""

from __future__ import annotations

import httpx

from ctxstore.domain.errors import StoreUnavailable


class ChatClient:
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

    def ask_json(self, system: str, user: str) -> str | None:
        """The assistant's message content, or None when the response isn't a chat completion."""
        try:
            r = self._client.post(
                "/chat/completions",
                json={
                    "model": self._model,
                    "temperature": 0,
                    "response_format": {"type": "json_object"},
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                },
            )
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"chat endpoint unreachable: {exc}") from exc
        if r.status_code == 429 or r.status_code >= 500:
            raise StoreUnavailable(f"chat endpoint answered {r.status_code}")
        r.raise_for_status()
        try:
            return str(r.json()["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError):
            return None
