"""Memory inference (infer=true) by an OpenAI-compatible chat endpoint; off unless CTXSTORE_INFERRER=llm.

The model gets the conversation and returns `{"memories": ["<standalone third-person sentence>", ...]}`.
An answer that isn't that shape keeps nothing (logged); throttling, 5xx and network failures are the
transient path (E6001, retried by the pipeline), like every other store the pipeline calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from ctxstore.adapters.models.openai_chat import ChatClient

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


class LlmMemoryInferrer(ChatClient):
    def infer_memories(self, texts: Sequence[str], user_name: str | None = None) -> list[str]:
        body = "\n\n".join(t for t in texts if t.strip())
        if not body:
            return []
        who = f"The user's name is {user_name}.\n\n" if user_name else ""
        content = self.ask_json(PROMPT, who + body)
        if content is None:
            log.warning("memory inference response is not a chat completion; nothing kept")
            return []
        return parse_memories(content)
