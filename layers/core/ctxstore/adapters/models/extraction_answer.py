"""The JSON answer both LLM extractors ask for, and its checked conversion to the port's types.

Shared by `models.llm_extractor` (OpenAI-compatible endpoint) and `aws.bedrock_extractor` (Bedrock
Converse), which may not import each other: one prompt, one parser, the same entities and relations.
Malformed answers are dropped (logged), never stored.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ctxstore.domain.graph_keys import canonical_predicate
from ctxstore.ports.extractor import ExtractedEntity, ExtractedRelation, Extraction

log = logging.getLogger("ctxstore.extractor")

PROMPT = (
    "Extract the named entities and the relations between them from the text. Answer with JSON only: "
    '{"entities": [{"key": "e1", "name": "...", "type": "person|organization|location|product|event|other"}], '
    '"relations": [{"source": "e1", "target": "e2", "predicate": "verb phrase as written", '
    '"context": "the sentence stating it", "confidence": 0.0-1.0, "temporal_details": "when, or null"}]}'
)

# Chat models asked for "JSON only" still sometimes wrap it in a Markdown fence.
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL | re.IGNORECASE)


def _s(v: Any) -> str:
    return v.strip() if isinstance(v, str) else ""


def parse_answer(content: str) -> Extraction:
    """Entities with a key and a name; relations between known keys with a predicate. Anything else dropped."""
    if isinstance(content, str) and (fenced := _FENCE.match(content)):
        content = fenced.group(1)
    try:
        data = json.loads(content)
    except (TypeError, ValueError):
        log.warning("extractor answer is not JSON; no entities or relations kept (%.80r)", content)
        return Extraction()
    if not isinstance(data, dict):
        log.warning("extractor answer is not a JSON object; no entities or relations kept")
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
