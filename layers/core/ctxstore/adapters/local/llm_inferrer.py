"""Memory inference (infer=true) by an OpenAI-compatible chat endpoint; off unless CTXSTORE_INFERRER=llm.

The model gets the conversation and returns `{"memories": ["<standalone third-person sentence>", ...]}`.
An answer that isn't that shape keeps nothing (logged); throttling, 5xx and network failures are the
transient path (E6001, retried by the pipeline), like every other store the pipeline calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import httpx

from ctxstore.domain.errors import StoreUnavailable

log = logging.getLogger("ctxstore.inferrer")

PROMPT = (
    "You extract long-term memories about the user from a conversation or note. Return only JSON of the form "
    '{"memories": ["..."]}: each item one standalone sentence in the third person about the user (use the '
    "user's name when given, else 'The user'), stating a preference, a fact about them, a plan or a habit. "
    "Only what the user states or clearly implies; nothing about the assistant; no duplicates; "
    '{"memories": []} when there is nothing.'
)
_MAX_MEMORIES = 50
_MAX_CHARS = 500


def parse_memories(content: str) -> list[str]:
    text = content.strip()
    if text.startswith("```"):  # some models fence JSON despite the instruction
        text = text.strip("`").removeprefix("json").strip()
    try:
        answer = json.loads(text)
    except ValueError:
        log.warning("memory inference answer is not JSON; nothing kept")
        return []
    items = answer.get("memories") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        log.warning("memory inference answer has no 'memories' list; nothing kept")
        return []
    out = [" ".join(m.split())[:_MAX_CHARS] for m in items if isinstance(m, str) and m.strip()]
    return list(dict.fromkeys(out))[:_MAX_MEMORIES]


class LlmMemoryInferrer:
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

    def infer_memories(self, texts: Sequence[str], user_name: str | None = None) -> list[str]:
        body = "\n\n".join(t for t in texts if t.strip())
        if not body:
            return []
        who = f"The user's name is {user_name}.\n\n" if user_name else ""
        try:
            r = self._client.post(
                "/chat/completions",
                json={
                    "model": self._model,
                    "temperature": 0,
                    "response_format": {"type": "json_object"},
                    "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": who + body}],
                },
            )
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"memory inference endpoint unreachable: {exc}") from exc
        if r.status_code == 429 or r.status_code >= 500:
            raise StoreUnavailable(f"memory inference endpoint answered {r.status_code}")
        r.raise_for_status()
        try:
            content = r.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            log.warning("memory inference response is not a chat completion; nothing kept")
            return []
        return parse_memories(str(content))
