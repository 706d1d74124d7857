"""Entity and relation extraction with a Bedrock chat model (off unless CTXSTORE_EXTRACTOR=bedrock).

One Converse call per chunk: the shared JSON-only instruction as the system prompt, the chunk as the
user turn, temperature 0. The answer goes through the same parser as the local LLM extractor
(`adapters/models/extraction_answer.py`), so both produce the same entities and relations; an answer that is
not that JSON (cut at maxTokens, refused, prose) yields nothing and a warning, never a failed item.
Throttling and service faults raise StoreUnavailable: the graph step retries them as E6001.
"""

from __future__ import annotations

import logging
from typing import Any

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.adapters.models.extraction_answer import PROMPT, parse_answer
from ctxstore.ports.extractor import Extraction

log = logging.getLogger("ctxstore.extractor")

MAX_CHARS = 20_000  # chunks are a few thousand characters; a runaway input must not buy a huge prompt
# Bedrock's own transient codes, beside the shared throttling/5xx/network set (adapters/aws/faults.py).
_TRANSIENT = frozenset({"ModelNotReadyException", "ModelTimeoutException"})


class BedrockExtractor:
    def __init__(
        self, model_id: str, *, client: Any = None, max_tokens: int = 2048, read_timeout_s: float = 60.0
    ) -> None:
        if not model_id:
            raise ValueError("the Bedrock extractor needs a model id (CTXSTORE_EXTRACTOR_MODEL_ID)")
        self._model = model_id
        self._max_tokens = max_tokens
        self._rt = map_faults(client or make_client("bedrock-runtime", read_timeout=read_timeout_s), extra=_TRANSIENT)

    def extract(self, text: str) -> Extraction:
        text = text.strip()[:MAX_CHARS]
        if not text:  # Converse refuses an empty text block; there is nothing to extract anyway
            return Extraction()
        resp = self._rt.converse(
            modelId=self._model,
            system=[{"text": PROMPT}],
            messages=[{"role": "user", "content": [{"text": text}]}],
            inferenceConfig={"maxTokens": self._max_tokens, "temperature": 0.0},
        )
        stop = resp.get("stopReason", "")
        if stop != "end_turn":  # max_tokens: truncated JSON; content_filtered/guardrail_intervened: refused
            log.warning("Bedrock extraction stopped with %s (model %s)", stop, self._model)
        blocks = ((resp.get("output") or {}).get("message") or {}).get("content") or []
        answer = "".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
        return parse_answer(answer)
