"""What the MCP tools share: their argument types and annotations, the call runner's type, and the helpers
that turn a tool's arguments into the API's items and documents."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from ctxstore.mcp.backend import ContextBackend, ToolFailure
from ctxstore.mcp.url_fetch import FetchRefused, fetch

Answer = Callable[..., str]  # runs one tool body with the call's backend and defaults (tools.build_server)

MAX_INLINE_BYTES = 3 * 1024 * 1024  # base64 content rides in the JSON-RPC body (4 MiB cap): ~3 MB of file
MISSING_DATABASE = " (see ctxstore_list_databases, or create it with ctxstore_create_database)"
MISSING_GRAPH_DATABASE = " (create it with ctxstore_graph_admin action=create_database)"
MAX_STATUS_LOOKUPS = 50  # ctxstore_list_databases shows readiness for this many databases; the rest by name


DatabaseArg = Annotated[
    str | None, Field(description="Database to use for this call; omit to use the connection's default database.")
]
CollectionArg = Annotated[
    str | None,
    Field(
        description="Collection inside the database; omit for the connection's default ('' is the default collection)."
    ),
]
Store = Literal["knowledge", "memory"]
StoreArg = Annotated[
    Store | None,
    Field(
        description="Which store holds the items: knowledge (documents, app items, notes) or memory (memories). "
        "Default knowledge."
    ),
]
KindAlias = Annotated[
    Store | None,
    Field(
        description="Deprecated alias of `type` (the API's and the command line's name), still accepted from older "
        "clients. Send `type`.",
        json_schema_extra={"deprecated": True},
    ),
]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class Turn(BaseModel):
    """One exchange of a conversation."""

    user: str = Field(default="", description="What the user said.")
    assistant: str = Field(default="", description="What the assistant answered.")


def store_of(type_: Store | None, kind: Store | None, default: Store | None) -> Store:
    """The store a call names: `type`, or its deprecated alias `kind`, or the tool's default (None: required)."""
    if type_ is not None and kind is not None and type_ != kind:
        raise ToolFailure(
            "INVALID_PARAMETERS", f"`type` is {type_} but the deprecated `kind` is {kind}: send `type` only"
        )
    chosen = type_ or kind or default
    if chosen is None:
        raise ToolFailure("INVALID_PARAMETERS", "`type` is required: knowledge or memory")
    return chosen


def memory_item(
    text: str | None,
    turns: list[Turn] | None,
    title: str | None,
    source_id: str | None,
    infer: bool,
    user_name: str | None,
) -> dict[str, Any]:
    item: dict[str, Any] = {"infer": infer}
    if text is not None:
        item["text"] = text
    else:
        item["user_assistant_pairs"] = [t.model_dump() for t in turns or []]
    item.update({k: v for k, v in (("title", title), ("id", source_id), ("user_name", user_name)) if v})
    return item


def knowledge_item(
    text: str | None, turns: list[Turn] | None, title: str | None, source_id: str | None, user_name: str | None
) -> dict[str, Any]:
    if text is None:
        speaker = user_name or "User"
        text = "\n".join(f"{speaker}: {t.user}\nAssistant: {t.assistant}" for t in turns or [])
    first_line = text.strip().splitlines()[0] if text.strip() else "note"
    item: dict[str, Any] = {
        "title": title or first_line[:80],
        "type": "note" if turns is None else "conversation",
        "content": {"text": text},
    }
    if source_id:
        item["id"] = source_id
    return item


def document(
    backend: ContextBackend, url: str | None, path: str | None, content_base64: str | None, filename: str | None
) -> tuple[str, bytes, str | None]:
    if url is not None:
        try:
            got = fetch(url, allow_private=backend.allow_private_urls)
        except FetchRefused as exc:
            raise ToolFailure("INVALID_PARAMETERS", str(exc)) from None
        return filename or got.filename, got.data, got.content_type
    if path is not None:
        if not backend.reads_local_files:
            raise ToolFailure(
                "INVALID_PARAMETERS",
                "`path` is only read by `ctxstore mcp` over stdio (your own files); "
                "here send `url` or `content_base64`",
            )
        file = Path(path).expanduser()
        if not file.is_file():
            raise ToolFailure("INVALID_PARAMETERS", f"no file at '{path}'")
        return filename or file.name, file.read_bytes(), None
    if not filename:
        raise ToolFailure("INVALID_PARAMETERS", "`content_base64` needs `filename` (its extension decides the format)")
    try:
        data = base64.b64decode(content_base64 or "", validate=True)
    except (binascii.Error, ValueError):
        raise ToolFailure("INVALID_PARAMETERS", "`content_base64` is not valid base64") from None
    if len(data) > MAX_INLINE_BYTES:
        raise ToolFailure("INVALID_PARAMETERS", "`content_base64` is over 3 MB; send a `url` instead")
    return filename, data, None
