"""Validation of one ingest request: every rule is checked before anything is stored.

The HTTP layer hands over plain values (form strings and uploads); this module
returns a typed request or raises ApiError naming the offending field.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxstore.domain import json_limits
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.graph_payload import ItemGraphPayload, parse_graph_payload

Store = Literal["knowledge", "memory"]

MAX_FILE_BYTES = 50 * 1024 * 1024
METADATA_CAP_BYTES = 16 * 1024
ADDITIONAL_METADATA_CAP_BYTES = 16 * 1024
MAX_ID_LENGTH = 512
DOCUMENT_METADATA_KEYS = frozenset({"id", "metadata", "additional_metadata", "relations"})
APP_KEYS = frozenset(
    {
        "id",
        "database",
        "collection",
        "tenant_id",
        "sub_tenant_id",
        "title",
        "type",
        "content",
        "metadata",
        "additional_metadata",
        "relates_to",
        "thread_id",
        "parent_id",
        "timestamp",
        "url",
        "provider",
        "external_id",
        "author",
        "relations",
        "tenant_metadata",
        "document_metadata",
    }
)
MEMORY_KEYS = frozenset(
    {
        "id",
        "text",
        "user_assistant_pairs",
        "title",
        "infer",
        "user_name",
        "metadata",
        "additional_metadata",
        "timestamp",
        "relations",
    }
)


@dataclass(frozen=True)
class Upload:
    filename: str
    content_type: str | None
    data: bytes


@dataclass(frozen=True)
class Link:
    target_id: str
    relation: str


@dataclass
class ItemSpec:
    """One accepted source, before it is stored."""

    id: str
    store: Store
    source_type: Literal["file", "app", "memory"]
    title: str
    metadata: dict[str, Any] = field(default_factory=dict)
    additional_metadata: dict[str, Any] = field(default_factory=dict)
    relations: list[str] = field(default_factory=list)  # forceful relations (ids)
    links: list[Link] = field(default_factory=list)  # item graph: relates_to
    thread_id: str | None = None
    parent_id: str | None = None
    timestamp: float | None = None
    # files
    upload: Upload | None = None
    ext: str | None = None
    # app items and memories
    text: str | None = None
    app_type: str | None = None
    provider: str | None = None
    external_id: str | None = None
    pairs: list[dict[str, str]] | None = None
    infer: bool = False
    user_name: str | None = None
    # a rejected file keeps its place in the results but is never stored
    rejected_code: str | None = None
    rejected_reason: str | None = None


@dataclass
class IngestRequest:
    store: Store
    database: str
    collection: str
    upsert: bool
    items: list[ItemSpec]
    graphs: dict[str, ItemGraphPayload]
    # "reject": a metadata key the database schema does not declare is a 400 (POST /context/ingest);
    # "keep": stored but not filterable (connector resource metadata, as the spec says).
    undeclared_metadata: Literal["reject", "keep"] = "reject"


def _bad(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_PARAMETERS, message)


def parse_bool(value: str | None, name: str, default: bool) -> bool:
    if value is None or value == "":
        return default
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise _bad(f"'{name}' must be true or false")


def _json_field(raw: str | None, name: str, kind: type) -> Any:
    if raw is None or raw == "":
        return None
    try:
        value = json_limits.loads(raw, f"'{name}'")
    except json.JSONDecodeError as exc:
        raise _bad(f"'{name}' must be a JSON-encoded {kind.__name__} string: {exc.msg}") from None
    if not isinstance(value, kind):
        raise _bad(f"'{name}' must be a JSON-encoded {'array' if kind is list else 'object'}")
    return value


def _check_id(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"{where}.id must be a non-empty string")
    if "," in value:
        raise _bad(f"{where}.id '{value}' contains a comma; commas separate ids in the status operation")
    if len(value) > MAX_ID_LENGTH:
        raise _bad(f"{where}.id is longer than {MAX_ID_LENGTH} characters")
    if any(ord(c) < 32 for c in value):
        raise _bad(f"{where}.id contains control characters")
    return value


def json_object(value: object, where: str) -> dict[str, Any]:
    """A JSON object field (None: empty); 400 naming `where` otherwise. Shared with the connector routes."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"{where} must be an object")
    return value


def _capped(value: dict[str, Any], where: str, cap: int) -> dict[str, Any]:
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if size > cap:
        raise _bad(f"{where} is {size} bytes; the limit is {cap} bytes")
    return value


def capped_object(value: object, where: str, cap: int) -> dict[str, Any]:
    """A JSON object at most `cap` bytes of compact UTF-8 JSON (the metadata caps)."""
    return _capped(json_object(value, where), where, cap)


def _relations(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, dict):
        ids = value.get("ids", [])
        unknown = sorted(set(value) - {"ids"})
        if unknown:
            raise _bad(f"{where}.relations: unknown key '{unknown[0]}' (use {{\"ids\": [...]}})")
    else:
        raise _bad(f"{where}.relations must be an object with a list of ids under 'ids'")
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise _bad(f"{where}.relations.ids must be a list of non-empty strings")
    return list(dict.fromkeys(ids))


def _links(value: object, where: str) -> list[Link]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(f"{where}.relates_to must be a list of {{id, relation}} objects")
    out: list[Link] = []
    for i, link in enumerate(value):
        if isinstance(link, str):
            link = {"id": link}
        if not isinstance(link, dict):
            raise _bad(f"{where}.relates_to[{i}] must be an object with 'id' and 'relation'")
        target = link.get("id", link.get("target_id"))
        if not isinstance(target, str) or not target:
            raise _bad(f"{where}.relates_to[{i}].id must be a non-empty string")
        relation = link.get("relation", link.get("type", "references"))
        if not isinstance(relation, str) or not relation.strip():
            raise _bad(f"{where}.relates_to[{i}].relation must be a non-empty string")
        out.append(Link(target, relation.strip()))
    return out


def _opt_str(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(f"{where} must be a string")
    return value


def _timestamp(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        from datetime import datetime

        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise _bad(f"{where}.timestamp must be epoch seconds or an ISO 8601 string")


def _new_id() -> str:
    return uuid.uuid4().hex


def _documents(uploads: list[Upload], raw_meta: str | None, classify: Any) -> list[ItemSpec]:
    metas = _json_field(raw_meta, "document_metadata", list)
    if metas is not None and len(metas) != len(uploads):
        raise ApiError(
            ErrorCode.VALIDATION_ERROR,
            f"'document_metadata' has {len(metas)} items but {len(uploads)} documents were uploaded; "
            "send one item per document, in the same order",
        )
    items: list[ItemSpec] = []
    for i, up in enumerate(uploads):
        where = f"document_metadata[{i}]"
        meta = json_object(metas[i] if metas is not None else {}, where)
        unknown = sorted(set(meta) - DOCUMENT_METADATA_KEYS)
        if unknown:
            raise _bad(
                f"{where}: key '{unknown[0]}' is not accepted; allowed keys are id, metadata, "
                "additional_metadata, relations (the title comes from the filename)"
            )
        if len(up.data) > MAX_FILE_BYTES:
            raise ApiError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"file '{up.filename}' is {len(up.data)} bytes; the limit is 50 MB per file",
            )
        item_id = _check_id(meta["id"], where) if "id" in meta else _new_id()
        name = up.filename.replace("\\", "/").rsplit("/", 1)[-1] or "untitled"
        ext = classify(name, up.content_type)
        spec = ItemSpec(
            id=item_id,
            store="knowledge",
            source_type="file",
            title=name,
            metadata=capped_object(meta.get("metadata"), f"{where}.metadata", METADATA_CAP_BYTES),
            additional_metadata=capped_object(
                meta.get("additional_metadata"), f"{where}.additional_metadata", ADDITIONAL_METADATA_CAP_BYTES
            ),
            relations=_relations(meta.get("relations"), where),
            upload=up,
            ext=ext,
        )
        if ext is None:
            spec.rejected_code = "E1002"
            spec.rejected_reason = f"unsupported file format: '{name}'"
        items.append(spec)
    return items


def _objects(values: list[Any], name: str, allowed: frozenset[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, item) for each element of a JSON array of objects whose keys are a closed set."""
    for i, item in enumerate(values):
        where = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise _bad(f"{where} must be an object")
        unknown = sorted(set(item) - allowed)
        if unknown:
            raise _bad(f"{where}: unknown key '{unknown[0]}'")
        yield where, item


def _app_items(raw: str | None, database: str, collection: str) -> list[ItemSpec]:
    values = _json_field(raw, "app_knowledge", list) or []
    items: list[ItemSpec] = []
    for where, item in _objects(values, "app_knowledge", APP_KEYS):
        for key, expected in (
            ("database", database),
            ("tenant_id", database),
            ("collection", collection),
            ("sub_tenant_id", collection),
        ):
            if key in item and item[key] not in (None, expected):
                raise _bad(f"{where}.{key} '{item[key]}' differs from the request's scope '{expected}'")
        content = item.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, dict) and isinstance(content.get("text"), str):
            text = content["text"]
        else:
            raise _bad(f"{where}.content must be an object with a 'text' string")
        metadata = item.get("metadata", item.get("tenant_metadata"))
        additional = item.get("additional_metadata", item.get("document_metadata"))
        title = _opt_str(item.get("title"), f"{where}.title") or ""
        items.append(
            ItemSpec(
                id=_check_id(item["id"], where) if "id" in item else _new_id(),
                store="knowledge",
                source_type="app",
                title=title,
                text=text,
                app_type=_opt_str(item.get("type"), f"{where}.type"),
                provider=_opt_str(item.get("provider"), f"{where}.provider"),
                external_id=_opt_str(item.get("external_id"), f"{where}.external_id"),
                metadata=capped_object(metadata, f"{where}.metadata", METADATA_CAP_BYTES),
                additional_metadata=capped_object(
                    additional, f"{where}.additional_metadata", ADDITIONAL_METADATA_CAP_BYTES
                ),
                relations=_relations(item.get("relations"), where),
                links=_links(item.get("relates_to"), where),
                thread_id=_opt_str(item.get("thread_id"), f"{where}.thread_id"),
                parent_id=_opt_str(item.get("parent_id"), f"{where}.parent_id"),
                timestamp=_timestamp(item.get("timestamp"), where),
            )
        )
    return items


def _memories(raw: str | None) -> list[ItemSpec]:
    values = _json_field(raw, "memories", list)
    if not values:
        raise _bad("'memories' is required and must be a non-empty JSON array when type=memory")
    items: list[ItemSpec] = []
    for where, item in _objects(values, "memories", MEMORY_KEYS):
        text = item.get("text")
        pairs = item.get("user_assistant_pairs")
        if text is not None and not isinstance(text, str):
            raise _bad(f"{where}.text must be a string")
        if pairs is not None:
            if not isinstance(pairs, list) or not pairs:
                raise _bad(f"{where}.user_assistant_pairs must be a non-empty array of {{user, assistant}}")
            for j, p in enumerate(pairs):
                if (
                    not isinstance(p, dict)
                    or not isinstance(p.get("user", ""), str)
                    or not isinstance(p.get("assistant", ""), str)
                    or not (p.get("user") or p.get("assistant"))
                ):
                    raise _bad(f"{where}.user_assistant_pairs[{j}] must be {{user: string, assistant: string}}")
        if not (text and text.strip()) and not pairs:
            raise _bad(f"{where} needs 'text' or 'user_assistant_pairs'")
        infer = item.get("infer", False)
        if not isinstance(infer, bool):
            raise _bad(f"{where}.infer must be a boolean")
        items.append(
            ItemSpec(
                id=_check_id(item["id"], where) if "id" in item else _new_id(),
                store="memory",
                source_type="memory",
                title=_opt_str(item.get("title"), f"{where}.title") or "",
                text=text if text and text.strip() else None,
                pairs=[{"user": p.get("user", ""), "assistant": p.get("assistant", "")} for p in pairs]
                if pairs
                else None,
                infer=infer,
                user_name=_opt_str(item.get("user_name"), f"{where}.user_name"),
                metadata=capped_object(item.get("metadata"), f"{where}.metadata", METADATA_CAP_BYTES),
                additional_metadata=capped_object(
                    item.get("additional_metadata"), f"{where}.additional_metadata", ADDITIONAL_METADATA_CAP_BYTES
                ),
                relations=_relations(item.get("relations"), where),
                timestamp=_timestamp(item.get("timestamp"), where),
            )
        )
    return items


def parse_ingest(
    *,
    store_raw: str | None,
    database: str,
    collection: str,
    upsert_raw: str | None,
    uploads: list[Upload],
    document_metadata: str | None,
    app_knowledge: str | None,
    memories: str | None,
    graph_payload: str | None,
    classify: Any,
) -> IngestRequest:
    store = (store_raw or "knowledge").strip().lower()
    if store not in ("knowledge", "memory"):
        raise _bad(f"'type' must be 'knowledge' or 'memory', not '{store_raw}'")
    upsert = parse_bool(upsert_raw, "upsert", True)
    items: list[ItemSpec]
    if store == "memory":
        if uploads:
            raise _bad("'documents' are not accepted with type=memory; send 'memories'")
        if app_knowledge:
            raise _bad("'app_knowledge' is not accepted with type=memory")
        if document_metadata:
            raise _bad("'document_metadata' is not accepted with type=memory")
        items = _memories(memories)
    else:
        if memories:
            raise _bad("'memories' is only accepted with type=memory")
        items = _documents(uploads, document_metadata, classify) + _app_items(app_knowledge, database, collection)
        if not items:
            raise _bad("a knowledge request needs 'documents', 'app_knowledge', or both")
    seen: set[str] = set()
    for it in items:
        if it.id in seen:
            raise _bad(f"id '{it.id}' appears more than once in the request")
        seen.add(it.id)
    raw_graphs = _json_field(graph_payload, "graph_payload", dict)
    graphs = parse_graph_payload(raw_graphs) if raw_graphs is not None else {}
    for key in graphs:
        if key not in seen:
            raise _bad(f"'graph_payload' key '{key}' matches no source in this request")
    return IngestRequest(
        store=store,  # type: ignore[arg-type]
        database=database,
        collection=collection,
        upsert=upsert,
        items=items,
        graphs=graphs,
    )
