"""Entity and relation extraction by an OpenAI-compatible chat endpoint (off unless configured).

One request per chunk asks for JSON `{entities: [{key, name, type}], relations: [{source,
target, predicate, context, confidence, temporal_details}]}`; the answer is checked and
anything malformed is dropped rather than stored (`adapters/models/extraction_answer.py`, shared with Bedrock).
"""

from __future__ import annotations

from ctxstore.adapters.models.extraction_answer import PROMPT, parse_answer
from ctxstore.adapters.models.openai_chat import ChatClient
from ctxstore.ports.extractor import Extraction

__all__ = ["PROMPT", "LlmExtractor", "parse_answer"]


class LlmExtractor(ChatClient):
    def extract(self, text: str) -> Extraction:
        content = self.ask_json(PROMPT, text)
        return parse_answer(content) if content is not None else Extraction()
