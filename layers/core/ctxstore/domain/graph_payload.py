"""Caller-supplied graphs (`graph_payload`): shape and limits, per item."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxstore.domain.errors import ApiError, ErrorCode

MAX_ENTITIES = 5000
MAX_RELATIONS = 10000
MAX_RELATIONS_PER_ENTITY = 500


@dataclass(frozen=True)
class PayloadEntity:
    key: str
    name: str
    type: str
    namespace: str = ""


@dataclass(frozen=True)
class PayloadRelation:
    source: str
    target: str
    predicate: str
    context: str = ""
    temporal_details: str | None = None


@dataclass
class ItemGraphPayload:
    entities: dict[str, PayloadEntity] = field(default_factory=dict)
    relations: list[PayloadRelation] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "entities": {
                k: {"name": e.name, "type": e.type, "namespace": e.namespace} for k, e in self.entities.items()
            },
            "relations": [
                {
                    "source": r.source,
                    "target": r.target,
                    "predicate": r.predicate,
                    "context": r.context,
                    "temporal_details": r.temporal_details,
                }
                for r in self.relations
            ],
        }


def _bad(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_PARAMETERS, message)


def _str(value: object, where: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise _bad(f"{where} must be a non-empty string")
    return value


def parse_item_graph(raw: object, where: str) -> ItemGraphPayload:
    if not isinstance(raw, dict):
        raise _bad(f"{where} must be an object with 'entities' and 'relations'")
    unknown = sorted(set(raw) - {"entities", "relations"})
    if unknown:
        raise _bad(f"{where}: unknown key '{unknown[0]}'")
    ents_raw = raw.get("entities") or {}
    if not isinstance(ents_raw, dict):
        raise _bad(f"{where}.entities must be an object keyed by local entity key")
    g = ItemGraphPayload()
    for key, e in ents_raw.items():
        w = f"{where}.entities.{key}"
        if not isinstance(e, dict):
            raise _bad(f"{w} must be an object with name, type, namespace")
        g.entities[key] = PayloadEntity(
            key,
            _str(e.get("name"), f"{w}.name"),
            _str(e.get("type"), f"{w}.type"),
            _str(e.get("namespace"), f"{w}.namespace", required=False),
        )
    rels_raw = raw.get("relations") or []
    if not isinstance(rels_raw, list):
        raise _bad(f"{where}.relations must be an array")
    for i, r in enumerate(rels_raw):
        w = f"{where}.relations[{i}]"
        if not isinstance(r, dict):
            raise _bad(f"{w} must be an object")
        src, tgt = _str(r.get("source"), f"{w}.source"), _str(r.get("target"), f"{w}.target")
        for end, name in ((src, "source"), (tgt, "target")):
            if end not in g.entities:
                raise _bad(f"{w}.{name} '{end}' is not a key of {where}.entities")
        temporal = r.get("temporal_details")
        if temporal is not None and not isinstance(temporal, str):
            raise _bad(f"{w}.temporal_details must be a string or null")
        g.relations.append(
            PayloadRelation(
                src,
                tgt,
                _str(r.get("predicate"), f"{w}.predicate"),
                _str(r.get("context"), f"{w}.context", required=False),
                temporal,
            )
        )
    return g


def parse_graph_payload(raw: dict[str, Any]) -> dict[str, ItemGraphPayload]:
    graphs = {str(k): parse_item_graph(v, f"graph_payload.{k}") for k, v in raw.items()}
    n_ent = sum(len(g.entities) for g in graphs.values())
    n_rel = sum(len(g.relations) for g in graphs.values())
    if n_ent > MAX_ENTITIES:
        raise _bad(f"graph_payload has {n_ent} entities; the limit is {MAX_ENTITIES}")
    if n_rel > MAX_RELATIONS:
        raise _bad(f"graph_payload has {n_rel} relations; the limit is {MAX_RELATIONS}")
    for item_id, g in graphs.items():
        per: dict[str, int] = {}
        for r in g.relations:
            per[r.source] = per.get(r.source, 0) + 1
            if r.target != r.source:
                per[r.target] = per.get(r.target, 0) + 1
        worst = max(per.items(), key=lambda kv: kv[1], default=None)
        if worst and worst[1] > MAX_RELATIONS_PER_ENTITY:
            raise _bad(
                f"graph_payload.{item_id}: entity '{worst[0]}' has {worst[1]} relations; "
                f"the limit is {MAX_RELATIONS_PER_ENTITY} per entity"
            )
    return graphs
