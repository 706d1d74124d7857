"""Notion block and rich-text objects as the API returns them: what tests seed fake pages with."""

from __future__ import annotations

from typing import Any

# ---- block and rich text builders (what tests seed pages with) ----------------------------------------------


def text(
    content: str, *, bold: bool = False, italic: bool = False, code: bool = False, href: str | None = None
) -> dict[str, Any]:
    annotations = {
        "bold": bold,
        "italic": italic,
        "strikethrough": False,
        "underline": False,
        "code": code,
        "color": "default",
    }
    return {
        "type": "text",
        "text": {"content": content, "link": {"url": href} if href else None},
        "annotations": annotations,
        "plain_text": content,
        "href": href,
    }


def mention(page_id: str, title: str) -> dict[str, Any]:
    return {
        "type": "mention",
        "mention": {"type": "page", "page": {"id": page_id}},
        "annotations": text("")["annotations"],
        "plain_text": title,
        "href": f"https://www.notion.so/{page_id.replace('-', '')}",
    }


def rich(parts: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [text(p) if isinstance(p, str) else p for p in parts]


def block(
    kind: str, payload: dict[str, Any] | None = None, children: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"type": kind, "payload": payload or {}, "children": children or []}


def para(*parts: Any, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return block("paragraph", {"rich_text": rich(parts), "color": "default"}, children)


def heading(level: int, *parts: Any, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    payload = {"rich_text": rich(parts), "is_toggleable": bool(children), "color": "default"}
    return block(f"heading_{level}", payload, children)


def bullet(*parts: Any, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return block("bulleted_list_item", {"rich_text": rich(parts), "color": "default"}, children)


def numbered(*parts: Any, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return block("numbered_list_item", {"rich_text": rich(parts), "color": "default"}, children)


def todo(content: str, checked: bool = False) -> dict[str, Any]:
    return block("to_do", {"rich_text": rich((content,)), "checked": checked, "color": "default"})


def toggle(*parts: Any, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return block("toggle", {"rich_text": rich(parts), "color": "default"}, children)


def quote(*parts: Any) -> dict[str, Any]:
    return block("quote", {"rich_text": rich(parts), "color": "default"})


def callout(content: str, emoji: str = "💡") -> dict[str, Any]:
    return block(
        "callout", {"rich_text": rich((content,)), "icon": {"type": "emoji", "emoji": emoji}, "color": "default"}
    )


def code(source: str, language: str = "python") -> dict[str, Any]:
    return block("code", {"rich_text": rich((source,)), "language": language, "caption": []})


def divider() -> dict[str, Any]:
    return block("divider")


def equation(expression: str) -> dict[str, Any]:
    return block("equation", {"expression": expression})


def bookmark(url: str, caption: str = "") -> dict[str, Any]:
    return block("bookmark", {"url": url, "caption": rich((caption,)) if caption else []})


def link_to_page(page_id: str) -> dict[str, Any]:
    return block("link_to_page", {"type": "page_id", "page_id": page_id})


def table(rows: list[list[str]], *, header: bool = True) -> dict[str, Any]:
    cells = [block("table_row", {"cells": [rich((c,)) for c in row]}) for row in rows]
    width = max(len(r) for r in rows)
    return block("table", {"table_width": width, "has_column_header": header, "has_row_header": False}, cells)


def columns(*cols: list[dict[str, Any]]) -> dict[str, Any]:
    return block("column_list", {}, [block("column", {}, list(c)) for c in cols])
