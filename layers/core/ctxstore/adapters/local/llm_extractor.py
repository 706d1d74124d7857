"""Entity and relation extraction by an OpenAI-compatible chat endpoint (off unless configured).

One request per chunk asks for JSON `{entities: [{key, name, type}], relations: [{source,
target, predicate, context, confidence, temporal_details}]}`; the answer is checked and
anything malformed is dropped rather than stored.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ctxstore.domain.graph_keys import canonical_predicate
from ctxstore.ports.extractor import ExtractedEntity, ExtractedRelation, Extraction

PROMPT = (
    "Extract the named entities and the relations between them from the text. Answer with JSON only: "
    '{"entities": [{"key": "e1", "name": "...", "type": "person|organization|location|product|event|other"}], '
    '"relations": [{"source": "e1", "target": "e2", "predicate": "verb phrase as written", '
    '"context": "the sentence stating it", "confidence": 0.0-1.0, "temporal_details": "when, or null"}]}'
)


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


def _s(v: Any) -> str:
    return v.strip() if isinstance(v, str) else ""


def parse_answer(content: str) -> Extraction:
    try:
        data = json.loads(content)
    except (TypeError, ValueError):
        return Extraction()
    if not isinstance(data, dict):
        return Extraction()
    entities: dict[str, ExtractedEntity] = {}
    for e in data.get("entities") or []:
        if isinstance(e, dict) and _s(e.get("key")) and _s(e.get("name")):
            entities[_s(e["key"])] = ExtractedEntity(_s(e["key"]), _s(e["name"]), _s(e.get("type")) or "other")
    relations = []
    for r in data.get("relations") or []:
        if not isinstance(r, dict) or _s(r.get("source")) not in entities or _s(r.get("target")) not in entities:
            continue
        predicate = _s(r.get("predicate"))
        if not predicate:
            continue
        try:
            confidence = min(1.0, max(0.0, float(r.get("confidence", 0.7))))
        except (TypeError, ValueError):
            confidence = 0.7
        temporal = _s(r.get("temporal_details")) or None
        relations.append(
            ExtractedRelation(
                source=_s(r["source"]),
                target=_s(r["target"]),
                raw_predicate=predicate,
                canonical_predicate=canonical_predicate(predicate),
                context=_s(r.get("context")),
                confidence=confidence,
                temporal_details=temporal,
            )
        )
    return Extraction(entities=list(entities.values()), relations=relations)
