"""Word 2007+ (.docx, .docm, .dotx) via python-docx: headings, lists, tables, equations, comments, notes.

External relationships (linked images, r:link, attached templates) are never followed: only parts inside
the package are read, and python-docx parses XML with entity resolution off.
"""

from __future__ import annotations

import io
import re
import zipfile

import docx
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from lxml import etree

from .archive import open_zip, parse_xml, read_member
from .markdown import heading, table
from .model import Budget, ParsedDocument, TextSink
from .ooxml_text import W, block_paragraphs, paragraph_text

_MAIN_DOC = b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
# python-docx only opens the plain document content type; templates and macro documents share its schema.
_ALIASES = (
    b"application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
    b"application/vnd.ms-word.document.macroEnabled.main+xml",
    b"application/vnd.ms-word.template.macroEnabledTemplate.main+xml",
)
_HEADING = re.compile(r"heading\s*(\d)", re.I)


def _as_document_package(data: bytes) -> bytes:
    zf = open_zip(data)
    types = read_member(zf, "[Content_Types].xml", 5_000_000) if "[Content_Types].xml" in zf.namelist() else b""
    if not any(alias in types for alias in _ALIASES):
        return data
    for alias in _ALIASES:
        types = types.replace(alias, _MAIN_DOC)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in zf.infolist():
            body = types if info.filename == "[Content_Types].xml" else read_member(zf, info.filename)
            dst.writestr(info.filename, body)
    return out.getvalue()


class _Renderer:
    def __init__(self, style_names: dict[str, str], budget: Budget) -> None:
        self.style_names = style_names
        self.budget = budget
        self.sink = TextSink()

    def paragraph(self, p: etree._Element) -> None:
        text = paragraph_text(p)
        if not text:
            return
        ppr = p.find(W + "pPr")
        style = ""
        level: int | None = None
        list_level: int | None = None
        if ppr is not None:
            ps = ppr.find(W + "pStyle")
            if ps is not None:
                style = self.style_names.get(ps.get(W + "val", ""), ps.get(W + "val", ""))
            outline = ppr.find(W + "outlineLvl")
            if outline is not None and (outline.get(W + "val") or "").isdigit():
                level = int(outline.get(W + "val", "0")) + 1
            num = ppr.find(W + "numPr")
            if num is not None:
                ilvl = num.find(W + "ilvl")
                list_level = int(ilvl.get(W + "val", "0")) if ilvl is not None else 0
        if m := _HEADING.fullmatch(style.strip()):
            level = int(m.group(1))
        elif style.lower() == "title":
            level = 1
        elif style.lower() == "subtitle":
            level = 2
        if level is not None and level <= 9:
            self.sink.add(heading(level, text))
        elif list_level is not None or style.lower().startswith("list"):
            self.sink.add("  " * min(list_level or 0, 8) + "- " + " ".join(text.split()))
        else:
            self.sink.add(text)

    def table(self, tbl: etree._Element) -> None:
        rows: list[list[str]] = []
        for tr in tbl.iter(W + "tr"):
            if next(tr.iterancestors(W + "tbl")) is not tbl:
                continue  # nested tables are flattened into their parent cell
            row: list[str] = []
            for tc in tr.findall(W + "tc"):
                row.append(" ".join(block_paragraphs(tc)))
                span = tc.find(f"{W}tcPr/{W}gridSpan")
                if span is not None and (span.get(W + "val") or "").isdigit():
                    row.extend([""] * (int(span.get(W + "val", "1")) - 1))
            rows.append(row)
        width = max((len(r) for r in rows), default=0)
        rendered = table([r + [""] * (width - len(r)) for r in rows])
        if rendered:
            self.sink.tables += 1
            self.sink.add(rendered)

    def blocks(self, container: etree._Element) -> None:
        for child in container:
            if self.sink.full:
                return
            if child.tag == W + "p":
                self.paragraph(child)
            elif child.tag == W + "tbl":
                self.budget.check()
                self.table(child)
            elif child.tag in (W + "sdt", W + "sdtContent", W + "customXml", W + "ins"):
                self.blocks(child)


def _notes(document: docx.document.Document, sink: TextSink) -> None:
    sections = {RT.COMMENTS: ("Comments", W + "comment"), RT.FOOTNOTES: ("Footnotes", W + "footnote"),
                RT.ENDNOTES: ("Endnotes", W + "endnote")}  # fmt: skip
    for rel in document.part.rels.values():
        if rel.is_external or rel.reltype not in sections:
            continue
        title, tag = sections[rel.reltype]
        root = parse_xml(rel.target_part.blob)
        items = []
        for note in root.iter(tag):
            if note.get(W + "type") in ("separator", "continuationSeparator", "continuationNotice"):
                continue
            text = " ".join(block_paragraphs(note))
            if text:
                items.append("- " + " ".join(text.split()))
        if items:
            sink.add(heading(2, title))
            sink.add("\n".join(items))


def parse_word(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    document = docx.Document(io.BytesIO(_as_document_package(data)))
    style_names = {s.style_id: s.name or "" for s in document.styles if s.style_id}
    renderer = _Renderer(style_names, budget)
    renderer.blocks(document.element.body)
    _notes(document, renderer.sink)
    sink = renderer.sink
    return ParsedDocument(text=sink.text(), format=ext.lstrip("."), tables=sink.tables, warnings=sink.warnings())
