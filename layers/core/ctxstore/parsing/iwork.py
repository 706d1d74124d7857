"""Apple iWork (.pages .numbers .key), both generations.

- iWork '09 and earlier: a zip with index.xml / index.apxl(.gz); text and table cells are read from that
  XML with a non-resolving lxml parser.
- iWork 2013+: protobuf archives (.iwa). Numbers documents go through numbers-parser (tables with
  computed values); Pages and Keynote text storages are decoded with keynote-parser's IWA codec.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import os
import tempfile
import warnings
import zipfile
from typing import Any

from lxml import etree

from .archive import open_zip, read_member, safe_xml_parser
from .markdown import cell_text, heading, table
from .model import MAX_SHEET_CELLS, MAX_ZIP_UNCOMPRESSED, Budget, ParsedDocument, ParseError, TextSink

SF = "{http://developer.apple.com/namespaces/sf}"
SFA = "{http://developer.apple.com/namespaces/sfa}"
_COCOA_EPOCH = dt.datetime(2001, 1, 1)
_XML_INDEXES = ("index.xml", "index.apxl", "index.xml.gz", "index.apxl.gz")
# Style sheets, master slides and thumbnails carry template placeholders, not document text.
_SKIP_LOCAL = {"stylesheet", "master-slides", "theme-list", "thumbnails", "metadata", "headers", "footers"}


# --- iWork '09 XML --------------------------------------------------------------------------------------


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _para_text(el: etree._Element) -> str:
    out: list[str] = [el.text or ""]
    for child in el:
        name = _local(child.tag)
        if name in ("tab",):
            out.append("\t")
        elif name in ("br", "lnbr", "pgbr", "sectbr", "crbr"):
            out.append("\n")
        elif name not in ("footnote",):
            out.append(_para_text(child))
        out.append(child.tail or "")
    return "".join(out)


def _cell_value(cell: etree._Element) -> tuple[str, int]:
    """(text, repeat count) of one datasource cell; ghost cells (sf:g) may stand for several."""
    name = _local(cell.tag)
    if name == "g":
        return "", max(1, min(int(cell.get(SF + "ct", "1") or 1), 10_000))
    if name == "s":
        return "", 1
    for ct in cell.iter(SF + "ct"):
        if ct.get(SFA + "s") is not None:
            return ct.get(SFA + "s", ""), 1
    for node in cell.iter():
        if node.get(SF + "cell-date") is not None:  # seconds since the Cocoa epoch
            value = node.get(SF + "cell-date", "")
            try:
                return cell_text(_COCOA_EPOCH + dt.timedelta(seconds=float(value))), 1
            except (ValueError, OverflowError):
                return value, 1
        if node.get(SF + "v") is not None:
            value = node.get(SF + "v", "")
            try:
                return cell_text(float(value)), 1
            except ValueError:
                return value, 1
    texts = [" ".join(_para_text(p).split()) for p in cell.iter(SF + "p")]
    return " ".join(t for t in texts if t), 1


def _xml_table(model: etree._Element) -> str:
    grid = model.find(f"{SF}grid")
    source = grid.find(f"{SF}datasource") if grid is not None else None
    if grid is None or source is None:
        return ""
    cols = max(1, int(grid.get(SF + "numcols", "1") or 1))
    values: list[str] = []
    for cell in source:
        text, repeat = _cell_value(cell)
        values.extend([text] * repeat)
        if len(values) > MAX_SHEET_CELLS:
            break
    rows = [values[i : i + cols] for i in range(0, len(values), cols)]
    return table([r + [""] * (cols - len(r)) for r in rows])


def _xml_walk(el: etree._Element, sink: TextSink, budget: Budget, slides: list[int]) -> None:
    for child in el:
        name = _local(child.tag)
        if sink.full or name in _SKIP_LOCAL:
            continue
        if name == "tabular-model":
            budget.check()
            title = child.get(SF + "name", "")
            rendered = _xml_table(child)
            if rendered:
                sink.add(heading(2, title) if title else "")
                sink.tables += 1
                sink.add(rendered)
        elif name in ("p", "li"):
            sink.add(_para_text(child).strip())
        elif name == "slide":
            slides[0] += 1
            sink.add(heading(2, f"Slide {slides[0]}"))
            _xml_walk(child, sink, budget, slides)
        else:
            _xml_walk(child, sink, budget, slides)


def _parse_xml_generation(zf: zipfile.ZipFile, index: str, budget: Budget) -> TextSink:
    raw = read_member(zf, index)
    if index.endswith(".gz"):
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            raw = fh.read(MAX_ZIP_UNCOMPRESSED + 1)
        if len(raw) > MAX_ZIP_UNCOMPRESSED:
            raise ParseError("iWork index inflates beyond the size limit")
    root = etree.fromstring(raw, parser=safe_xml_parser())
    sink = TextSink()
    _xml_walk(root, sink, budget, [0])
    return sink


# --- iWork 2013+ (IWA) ----------------------------------------------------------------------------------

_BODY, _TEXTBOX, _NOTE = 0, 3, 4


def _iwa_members(zf: zipfile.ZipFile) -> list[tuple[str, bytes]]:
    names = zf.namelist()
    nested = [n for n in names if n.endswith("Index.zip")]
    if nested:  # Keynote/Pages 2013+ single-file bundles keep their archives in an inner Index.zip
        inner = open_zip(read_member(zf, nested[0]))
        return [(n, read_member(inner, n)) for n in inner.namelist() if n.endswith(".iwa")]
    return [(n, read_member(zf, n)) for n in names if n.endswith(".iwa")]


def _parse_iwa_text(zf: zipfile.ZipFile, ext: str, budget: Budget) -> TextSink:
    from keynote_parser.codec import IWAFile

    members = _iwa_members(zf)
    if not members:
        raise ParseError("no iWork index found in the package")
    body: list[str] = []
    boxes: list[str] = []
    notes: list[str] = []
    cells: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown archive types are expected and preserved by the codec
        for name, raw in sorted(members, key=lambda m: m[0]):
            if "MasterSlide" in name or "Stylesheet" in name or "ViewState" in name:
                continue
            budget.check()
            for chunk in IWAFile.from_buffer(raw, name).chunks:
                for segment in chunk.archives:
                    for obj in segment.objects:
                        kind = type(obj).__name__
                        if kind == "StorageArchive":
                            text = "".join(obj.text).replace("\ufffc", "").strip()
                            target = {_BODY: body, _NOTE: notes}.get(obj.kind, boxes)
                            if text:
                                target.append(text)
                        elif kind == "TableDataList" and obj.listType == 1:  # string table of table cells
                            cells.extend(e.string for e in obj.entries if e.string)
    sink = TextSink()
    for block in body + boxes:
        for para in block.split("\n"):
            sink.add(para.strip())
    if cells:
        sink.add(heading(2, "Table cells"))
        sink.add("\n".join(f"- {c}" for c in reversed(cells)))
    if notes:
        sink.add(heading(2, "Notes"))
        sink.add("\n\n".join(notes))
    return sink


def _parse_numbers_iwa(data: bytes, budget: Budget) -> TextSink:
    from numbers_parser import Document

    # numbers-parser opens paths only; the temporary copy is removed right after loading.
    fd, path = tempfile.mkstemp(suffix=".numbers")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        doc: Any = Document(path)
    finally:
        os.unlink(path)
    sink = TextSink()
    for sheet in doc.sheets:
        sink.add(heading(2, sheet.name))
        for tbl in sheet.tables:
            budget.check()
            rows = [[cell_text(c.value) for c in row] for row in tbl.iter_rows()]
            rendered = table(rows)
            if rendered:
                sink.add(heading(3, tbl.name))
                sink.tables += 1
                sink.add(rendered)
    return sink


def parse_iwork(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    zf = open_zip(data)
    names = zf.namelist()
    index = next((n for n in names for i in _XML_INDEXES if n == i or n.endswith("/" + i)), None)
    if index is not None:
        sink = _parse_xml_generation(zf, index, budget)
    elif ext == ".numbers":
        sink = _parse_numbers_iwa(data, budget)
    else:
        sink = _parse_iwa_text(zf, ext, budget)
    return ParsedDocument(text=sink.text(), format=ext.lstrip("."), tables=sink.tables, warnings=sink.warnings())
