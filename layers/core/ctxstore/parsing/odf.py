"""OpenDocument text and presentations (.odt .ott .odp .otp) via odfpy.

odfpy parses with the standard SAX parser, which does not fetch external entities. Spreadsheets
(.ods .ots) go through the spreadsheet module (calamine) instead.
"""

from __future__ import annotations

import io
import re
from typing import Any

from odf import opendocument
from odf.namespaces import DRAWNS, OFFICENS, PRESENTATIONNS, TABLENS, TEXTNS

from .archive import open_zip
from .markdown import heading, table
from .model import Budget, ParsedDocument, TextSink
from .odf_macros import basic_macros

Node = Any  # odfpy elements are untyped

_MAX_REPEAT = 256  # repeated empty rows/columns are padding, not content


def _attr(el: Node, ns: str, name: str) -> str:
    return str(el.attributes.get((ns, name), ""))


def _children(el: Node) -> list[Node]:
    return list(getattr(el, "childNodes", []))


class _Walker:
    def __init__(self, budget: Budget) -> None:
        self.sink = TextSink()
        self.budget = budget
        self.notes: list[str] = []
        self.comments: list[str] = []
        self.slide = 0

    def inline(self, el: Node, out: list[str]) -> None:
        for child in _children(el):
            if child.nodeType == child.TEXT_NODE:
                out.append(str(child.data))
                continue
            ns, name = child.qname
            if ns == TEXTNS and name == "s":
                out.append(" " * min(int(_attr(child, TEXTNS, "c") or 1), 100))
            elif ns == TEXTNS and name == "tab":
                out.append("\t")
            elif ns == TEXTNS and name == "line-break":
                out.append("\n")
            elif ns == TEXTNS and name == "note":
                body = [c for c in _children(child) if c.qname == (TEXTNS, "note-body")]
                self.notes.extend(self.plain(b) for b in body)
            elif ns == OFFICENS and name == "annotation":
                self.comments.append(self.plain(child))
            elif ns == TEXTNS and name in ("p", "h"):  # paragraphs nested in frames
                self.inline(child, out)
                out.append("\n")
            else:
                self.inline(child, out)

    def plain(self, el: Node) -> str:
        out: list[str] = []
        self.inline(el, out)
        return " ".join("".join(out).split())

    def cell_rows(self, tbl: Node) -> list[list[str]]:
        rows: list[list[str]] = []
        stack = [tbl]
        while stack:
            node = stack.pop(0)
            for child in _children(node):
                if child.nodeType != child.ELEMENT_NODE:
                    continue
                if child.qname == (TABLENS, "table-row"):
                    row: list[str] = []
                    for cell in _children(child):
                        if cell.nodeType != cell.ELEMENT_NODE:
                            continue
                        text = self.plain(cell)
                        repeat = int(_attr(cell, TABLENS, "number-columns-repeated") or 1)
                        row.extend([text] * (min(repeat, _MAX_REPEAT) if text else min(repeat, 1)))
                    repeat = int(_attr(child, TABLENS, "number-rows-repeated") or 1)
                    rows.extend([row] * (min(repeat, _MAX_REPEAT) if any(row) else 1))
                elif child.qname[0] == TABLENS and child.qname[1] in (
                    "table-header-rows", "table-rows", "table-row-group",
                ):  # fmt: skip
                    self.inline_rows(child, rows)
        return rows

    def inline_rows(self, group: Node, rows: list[list[str]]) -> None:
        rows.extend(self.cell_rows(group))

    def block(self, el: Node, depth: int = 0) -> None:
        for child in _children(el):
            if child.nodeType != child.ELEMENT_NODE or self.sink.full:
                continue
            ns, name = child.qname
            if ns == TEXTNS and name == "h":
                level = int(_attr(child, TEXTNS, "outline-level") or 1)
                self.sink.add(heading(level, self.plain(child)))
            elif ns == TEXTNS and name == "p":
                text = self.plain(child)
                if text:
                    self.sink.add(("  " * (depth - 1) + "- " + text) if depth else text)
            elif ns == TEXTNS and name == "list":
                self.list_block(child, depth)
            elif ns == TABLENS and name == "table":
                self.table_block(child)
            elif ns == DRAWNS and name == "page":
                self.slide_block(child, depth)
            elif ns == PRESENTATIONNS and name == "notes":
                self.notes_block(child)
            elif ns == OFFICENS and name in ("forms", "annotation"):
                if name == "annotation":
                    self.comments.append(self.plain(child))
            else:
                self.block(child, depth)

    def list_block(self, el: Node, depth: int) -> None:
        self.budget.check()
        outer = self.sink
        self.sink = TextSink(max(0, outer.limit - outer.size))
        for item in _children(el):
            if item.nodeType == item.ELEMENT_NODE:
                self.block(item, depth + 1)
        inner, self.sink = self.sink, outer
        self.sink.tables += inner.tables
        self.sink.add("\n".join(inner.blocks))  # one block, so the list renders tight

    def table_block(self, el: Node) -> None:
        self.budget.check()
        rows = self.cell_rows(el)
        width = max((len(r) for r in rows), default=0)
        rendered = table([r + [""] * (width - len(r)) for r in rows])
        if rendered:
            self.sink.tables += 1
            self.sink.add(rendered)

    def slide_block(self, el: Node, depth: int) -> None:
        self.slide += 1
        title = _attr(el, DRAWNS, "name")
        generic = not title or re.fullmatch(r"(page|slide)\s*\d+", title, re.I)
        self.sink.add(heading(2, f"Slide {self.slide}" + ("" if generic else f": {title}")))
        self.block(el, depth)

    def notes_block(self, el: Node) -> None:
        notes = TextSink()
        sub = _Walker(self.budget)
        sub.sink = notes
        sub.block(el)
        if notes.blocks:
            self.sink.add("### Notes")
            self.sink.add(notes.text())


def parse_odf(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    open_zip(data)  # bomb checks before odfpy inflates content.xml
    doc = opendocument.load(io.BytesIO(data))
    walker = _Walker(budget)
    walker.block(doc.body)
    sink = walker.sink
    for title, items in (("Notes", walker.notes), ("Comments", walker.comments)):
        items = [i for i in items if i]
        if items:
            sink.add(heading(2, title))
            sink.add("\n".join(f"- {i}" for i in items))
    sink.add(basic_macros(data))
    pages = walker.slide or None
    return ParsedDocument(
        text=sink.text(), format=ext.lstrip("."), pages=pages, tables=sink.tables, warnings=sink.warnings()
    )
