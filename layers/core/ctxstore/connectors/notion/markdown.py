"""Notion blocks, rich text and properties as markdown, and the links they carry.

Input is a block tree as `notion_sync.fetch_tree` builds it: Notion block objects, each with the extra key
`_children` (its fetched children). Headings, paragraphs, bulleted/numbered lists, to-dos, code, quotes,
callouts, toggles (and toggleable headings), tables, dividers, equations, bookmarks/embeds/media (captions;
Notion-hosted file URLs are left out: they are signed per request and would make every fetch look like an
edit), columns and synced blocks render as markdown. A child page becomes a link line and is listed in
`child_pages` (it is an object of its own); `link_to_page` blocks become `linked_to` links and page mentions
in rich text `mentions` links.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ctxstore.ports.connector_provider import ObjectLink

_UUID = re.compile(r"^[0-9a-fA-F]{32}$")
_DASHED = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
LIST_TYPES = ("bulleted_list_item", "numbered_list_item", "to_do")
SKIPPED = frozenset({"breadcrumb", "table_of_contents", "template", "unsupported", "column_list", "column"})


def nid(value: object) -> str:
    """A Notion id in its dashed lower-case form (the API answers both forms in places)."""
    text = str(value or "").strip().lower()
    if _UUID.match(text):
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
    return text


def notion_url(object_id: str) -> str:
    return f"https://www.notion.so/{nid(object_id).replace('-', '')}"


def epoch(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def plain(rich: object) -> str:
    if not isinstance(rich, list):
        return ""
    return "".join(str(r.get("plain_text") or "") for r in rich if isinstance(r, dict))


def title_of(obj: dict[str, Any]) -> str:
    """A page's title property, or a data source's title."""
    if isinstance(obj.get("title"), list):
        return plain(obj["title"]).strip()
    for prop in (obj.get("properties") or {}).values():
        if isinstance(prop, dict) and prop.get("type") == "title":
            return plain(prop.get("title")).strip()
    return ""


@dataclass
class Rendered:
    lines: list[str] = field(default_factory=list)
    links: list[ObjectLink] = field(default_factory=list)
    child_pages: list[str] = field(default_factory=list)

    def link(self, target: str, relation: str) -> None:
        link = ObjectLink(nid(target), relation)
        if link not in self.links:
            self.links.append(link)

    @property
    def text(self) -> str:
        out: list[str] = []
        for line in self.lines:
            if line == "" and (not out or out[-1] == ""):
                continue
            out.append(line)
        return "\n".join(out).strip()


def rich(items: object, out: Rendered) -> str:
    """Rich text as inline markdown; page mentions are recorded as `mentions` links."""
    if not isinstance(items, list):
        return ""
    parts: list[str] = []
    for r in items:
        if not isinstance(r, dict):
            continue
        text = str(r.get("plain_text") or "")
        if r.get("type") == "mention":
            mention = r.get("mention") or {}
            if mention.get("type") == "page" and isinstance(mention.get("page"), dict):
                target = str(mention["page"].get("id") or "")
                if target:
                    out.link(target, "mentions")
                    parts.append(f"[{text or 'page'}]({notion_url(target)})")
                    continue
            parts.append(text)
            continue
        if r.get("type") == "equation":
            parts.append(f"${text}$")
            continue
        if not text.strip():
            parts.append(text)
            continue
        a = r.get("annotations") or {}
        if a.get("code"):
            text = f"`{text}`"
        if a.get("bold"):
            text = f"**{text}**"
        if a.get("italic"):
            text = f"*{text}*"
        if a.get("strikethrough"):
            text = f"~~{text}~~"
        href = r.get("href")
        if isinstance(href, str) and href:
            text = f"[{text}]({href})"
        parts.append(text)
    return "".join(parts)


def _payload(block: dict[str, Any]) -> dict[str, Any]:
    value = block.get(str(block.get("type") or ""))
    return value if isinstance(value, dict) else {}


def _media(kind: str, p: dict[str, Any], out: Rendered) -> str:
    caption = rich(p.get("caption"), out)
    name = str(p.get("name") or "")
    external = (p.get("external") or {}).get("url") if p.get("type") == "external" else None
    label = caption or name or kind
    if external:
        return f"![{label}]({external})" if kind == "image" else f"[{label}]({external})"
    return f"[{kind}: {label}]" if label != kind else f"[{kind}]"


def _table(block: dict[str, Any], out: Rendered, indent: str) -> None:
    rows = [c for c in block.get("_children") or [] if c.get("type") == "table_row"]
    if not rows:
        return
    cells = [
        [rich(cell, out).replace("|", "\\|").replace("\n", " ") for cell in _payload(r).get("cells") or []]
        for r in rows
    ]
    width = max(len(r) for r in cells)
    cells = [r + [""] * (width - len(r)) for r in cells]
    has_header = bool(_payload(block).get("has_column_header"))
    header, body = (cells[0], cells[1:]) if has_header else ([""] * width, cells)
    out.lines.append(indent + "| " + " | ".join(header) + " |")
    out.lines.append(indent + "|" + "---|" * width)
    out.lines.extend(indent + "| " + " | ".join(r) + " |" for r in body)
    out.lines.append("")


def render(blocks: list[dict[str, Any]], out: Rendered, indent: str = "") -> None:
    """Append the markdown of sibling blocks (and their children) to `out`."""
    number = 0
    for block in blocks:
        kind = str(block.get("type") or "")
        p = _payload(block)
        children = block.get("_children") or []
        number = number + 1 if kind == "numbered_list_item" else 0
        if kind in ("heading_1", "heading_2", "heading_3"):
            out.lines += ["", indent + "#" * int(kind[-1]) + " " + rich(p.get("rich_text"), out), ""]
            render(children, out, indent)
        elif kind in LIST_TYPES:
            marker = {"bulleted_list_item": "- ", "numbered_list_item": f"{number}. "}.get(kind)
            if kind == "to_do":
                marker = "- [x] " if p.get("checked") else "- [ ] "
            out.lines.append(indent + str(marker) + rich(p.get("rich_text"), out))
            render(children, out, indent + "  ")
        elif kind == "toggle":
            out.lines.append(indent + "▸ " + rich(p.get("rich_text"), out))
            render(children, out, indent + "  ")
        elif kind in ("quote", "callout"):
            _quote(kind, p, children, out, indent)
        elif kind in _LEAVES:
            _LEAVES[kind](kind, block, p, out, indent)
        elif kind not in SKIPPED and kind != "synced_block" and isinstance(p.get("rich_text"), list):
            text = rich(p["rich_text"], out)  # paragraph and any text-bearing type
            out.lines += ["", indent + text, ""] if not indent else [indent + text]
            render(children, out, indent + "  ")
        else:  # skipped wrappers, synced blocks and unknown types: their children only
            render(children, out, indent)


def _quote(kind: str, p: dict[str, Any], children: list[dict[str, Any]], out: Rendered, indent: str) -> None:
    icon = (p.get("icon") or {}).get("emoji") if kind == "callout" else None
    text = rich(p.get("rich_text"), out)
    out.lines += ["", indent + "> " + (f"{icon} " if icon else "") + text]
    nested = Rendered(links=out.links, child_pages=out.child_pages)
    render(children, nested)
    out.lines += [indent + "> " + line if line else indent + ">" for line in nested.text.splitlines()]
    out.lines.append("")


def _code(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    language = str(p.get("language") or "")
    out.lines += ["", indent + f"```{'' if language == 'plain text' else language}"]
    out.lines += [indent + line for line in plain(p.get("rich_text")).splitlines()]
    out.lines += [indent + "```", ""]


def _equation(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    out.lines += ["", indent + f"$$ {p.get('expression') or ''} $$", ""]


def _divider(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    out.lines += ["", indent + "---", ""]


def _table_block(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    out.lines.append("")
    _table(block, out, indent)


def _child_page(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    target = nid(block.get("id"))
    out.child_pages.append(target)
    out.lines.append(indent + f"[{p.get('title') or 'Untitled'}]({notion_url(target)})")


def _child_database(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    out.lines.append(indent + f"[Database: {p.get('title') or 'Untitled'}]({notion_url(str(block.get('id')))})")


def _link_to_page(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    ref = str(p.get("type") or "")
    target = str(p.get(ref) or "")
    if target and ref in ("page_id", "data_source_id"):
        out.link(target, "linked_to")
        out.lines.append(indent + f"→ [linked page]({notion_url(target)})")


def _bookmark(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    url = str(p.get("url") or "")
    caption = rich(p.get("caption"), out)
    if url:
        out.lines.append(indent + f"[{caption or url}]({url})")


def _media_block(kind: str, block: dict[str, Any], p: dict[str, Any], out: Rendered, indent: str) -> None:
    out.lines.append(indent + _media(kind, p, out))


# Blocks without children of their own to render: each type's markdown.
_LEAVES: dict[str, Callable[[str, dict[str, Any], dict[str, Any], Rendered, str], None]] = {
    "code": _code,
    "equation": _equation,
    "divider": _divider,
    "table": _table_block,
    "child_page": _child_page,
    "child_database": _child_database,
    "link_to_page": _link_to_page,
    **dict.fromkeys(("bookmark", "embed", "link_preview"), _bookmark),
    **dict.fromkeys(("image", "video", "file", "pdf", "audio"), _media_block),
}


def _property_value(prop: dict[str, Any], out: Rendered) -> str:
    kind = str(prop.get("type") or "")
    v = prop.get(kind)
    if kind in ("rich_text", "title"):
        return rich(v, out)
    if kind in ("select", "status"):
        return str((v or {}).get("name") or "")
    if kind == "multi_select":
        return ", ".join(str(o.get("name") or "") for o in v or [] if isinstance(o, dict))
    if kind in ("number", "url", "email", "phone_number"):
        return "" if v is None else str(v)
    if kind == "checkbox":
        return "yes" if v else "no"
    if kind == "date" and isinstance(v, dict):
        return str(v.get("start") or "") + (f" → {v['end']}" if v.get("end") else "")
    if kind == "people":
        return ", ".join(str(u.get("name") or u.get("id") or "") for u in v or [] if isinstance(u, dict))
    if kind == "relation":
        for r in v or []:
            if isinstance(r, dict) and r.get("id"):
                out.link(str(r["id"]), "related")
        return ", ".join(notion_url(str(r["id"])) for r in v or [] if isinstance(r, dict) and r.get("id"))
    if kind == "formula" and isinstance(v, dict):
        inner = v.get(str(v.get("type") or ""))
        return (
            str((inner or {}).get("start") or "") if isinstance(inner, dict) else ("" if inner is None else str(inner))
        )
    if kind == "unique_id" and isinstance(v, dict):
        prefix = f"{v['prefix']}-" if v.get("prefix") else ""
        return f"{prefix}{v.get('number')}"
    if kind == "files":
        return ", ".join(str(f.get("name") or "") for f in v or [] if isinstance(f, dict))
    return ""  # created/last edited time and by, rollups, buttons: change without an edit, or derived


def render_properties(page: dict[str, Any], out: Rendered) -> None:
    """A data-source row's properties (all but the title) as `**Name:** value` lines."""
    props = page.get("properties") or {}
    for name in sorted(props):
        prop = props[name]
        if not isinstance(prop, dict) or prop.get("type") == "title":
            continue
        value = _property_value(prop, out).strip()
        if value:
            out.lines.append(f"**{name}:** {value}")
    if props:
        out.lines.append("")
