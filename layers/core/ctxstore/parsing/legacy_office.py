"""Legacy binary Office files (.doc .dot .ppt) read from their OLE2 streams with olefile.

.doc/.dot: text through the Word 97+ piece table (MS-DOC 2.4.1), tables rebuilt from cell marks.
.ppt: text atoms of the PowerPoint Document stream (MS-PPT), grouped per slide; masters are skipped.
.xls goes to the spreadsheet module (calamine).
"""

from __future__ import annotations

import io
import struct

import olefile

from .markdown import heading, table
from .model import MAX_TEXT_CHARS, Budget, ParsedDocument, ParseError, TextSink


def _open_ole(data: bytes) -> olefile.OleFileIO:
    if not olefile.isOleFile(io.BytesIO(data)):
        raise ParseError("not an OLE2 (legacy Office) document")
    try:
        return olefile.OleFileIO(io.BytesIO(data))
    except OSError as exc:
        raise ParseError(f"corrupt OLE2 container: {exc}") from exc


def _stream(ole: olefile.OleFileIO, name: str) -> bytes:
    if not ole.exists(name):
        raise ParseError(f"missing {name!r} stream; not this kind of document")
    return bytes(ole.openstream(name).read())


# --- Word ---------------------------------------------------------------------------------------------

_DROP = dict.fromkeys([0x01, 0x02, 0x03, 0x04, 0x05, 0x08, 0x1F], None)
_MAP = {0x0B: "\n", 0x0C: "\n", 0x0E: "\n", 0x1E: "-", 0xA0: " "}


def _word_pieces(word: bytes, tbl: bytes, fc_clx: int, lcb_clx: int) -> str:
    clx = tbl[fc_clx : fc_clx + lcb_clx]
    i = 0
    while i < len(clx) and clx[i] == 0x01:  # Prc entries (property modifiers) precede the piece table
        i += 3 + struct.unpack_from("<H", clx, i + 1)[0]
    if i >= len(clx) or clx[i] != 0x02:
        raise ParseError("corrupt Word piece table")
    lcb = struct.unpack_from("<I", clx, i + 1)[0]
    plc = clx[i + 5 : i + 5 + lcb]
    n = (len(plc) - 4) // 12
    cps = struct.unpack_from(f"<{n + 1}I", plc, 0)
    parts: list[str] = []
    total = 0
    for k in range(n):
        fc_raw = struct.unpack_from("<I", plc, 4 * (n + 1) + 8 * k + 2)[0]
        count = max(0, cps[k + 1] - cps[k])
        fc = fc_raw & 0x3FFFFFFF
        if fc_raw & 0x40000000:  # "compressed": one cp1252 byte per character
            chunk = word[fc // 2 : fc // 2 + count].decode("cp1252", errors="replace")
        else:
            chunk = word[fc : fc + 2 * count].decode("utf-16-le", errors="replace")
        parts.append(chunk)
        total += len(chunk)
        if total > MAX_TEXT_CHARS:
            break
    return "".join(parts)


def _strip_fields(text: str) -> str:
    """Keep field results (between 0x14 and 0x15), drop field codes (between 0x13 and 0x14)."""
    out: list[str] = []
    stack: list[bool] = []  # True while inside a field's code part
    for ch in text:
        if ch == "\x13":
            stack.append(True)
        elif ch == "\x14":
            if stack:
                stack[-1] = False
        elif ch == "\x15":
            if stack:
                stack.pop()
        elif not any(stack):
            out.append(ch)
    return "".join(out)


def _word_blocks(text: str, sink: TextSink) -> None:
    """Paragraphs end with \\r; table cells end with \\x07 and a row with an extra empty \\x07."""
    text = _strip_fields(text).translate(_DROP)
    text = "".join(_MAP.get(ord(c), c) for c in text)
    rows: list[list[str]] = []
    row: list[str] = []
    pending: list[str] = []
    buf: list[str] = []

    def flush_table() -> None:
        if rows:
            width = max(len(r) for r in rows)
            rendered = table([r + [""] * (width - len(r)) for r in rows])
            if rendered:
                sink.tables += 1
                sink.add(rendered)
            rows.clear()

    for ch in text + "\r":
        if ch not in "\r\x07":
            buf.append(ch)
            continue
        para = "".join(buf).strip()
        buf.clear()
        if ch == "\x07":
            if not para and not pending and row:
                rows.append(row)
                row = []
            else:
                row.append(" ".join([*pending, para]).strip())
                pending = []
        elif row:
            pending.append(para)
        else:
            flush_table()
            if para:
                sink.add(para)
    if row:
        rows.append(row)
    flush_table()


def _parse_word(ole: olefile.OleFileIO) -> TextSink:
    word = _stream(ole, "WordDocument")
    if len(word) < 0x200 or struct.unpack_from("<H", word, 0)[0] != 0xA5EC:
        raise ParseError("not a Word 97+ document")
    n_fib, flags = struct.unpack_from("<H", word, 2)[0], struct.unpack_from("<H", word, 0x0A)[0]
    if flags & 0x0100:
        raise ParseError("Word document is encrypted")
    sink = TextSink()
    if n_fib < 101:  # Word 6/95: text stored contiguously, 8-bit
        fc_min, fc_mac = struct.unpack_from("<II", word, 0x18)
        _word_blocks(word[fc_min:fc_mac].decode("cp1252", errors="replace"), sink)
        return sink
    csw = struct.unpack_from("<H", word, 0x20)[0]
    lw = 0x22 + 2 * csw
    cslw = struct.unpack_from("<H", word, lw)[0]
    rglw = lw + 2
    ccp = struct.unpack_from("<11i", word, rglw)[3:11]  # ccpText, Ftn, Hdd, Mcr, Atn, Edn, Txbx, HdrTxbx
    blob = rglw + 4 * cslw + 2
    fc_clx, lcb_clx = struct.unpack_from("<II", word, blob + 33 * 8)
    tbl = _stream(ole, "1Table" if flags & 0x0200 else "0Table")
    text = _word_pieces(word, tbl, fc_clx, lcb_clx)
    # Story order in the CP space; "" marks stories that are skipped (headers, macro text).
    titles: list[str | None] = [None, "Footnotes", "", "", "Comments", "Endnotes", "Text boxes"]
    bounds = list(zip(titles, ccp, strict=False))
    start = 0
    for title, length in bounds:
        part = text[start : start + max(0, length)]
        start += max(0, length)
        if title == "" or not part.strip():
            continue  # headers and macro text are skipped
        if title:
            sink.add(heading(2, title))
        _word_blocks(part, sink)
    return sink


# --- PowerPoint ---------------------------------------------------------------------------------------

_RT_SLIDE, _RT_NOTES, _RT_MAIN_MASTER, _RT_HANDOUT = 0x03EE, 0x03F0, 0x03F8, 0x0FC9
_RT_SLWT, _RT_SLIDE_PERSIST, _RT_TEXT_HEADER = 0x0FF0, 0x03F3, 0x0F9F
_RT_TEXT_CHARS, _RT_TEXT_BYTES = 0x0FA0, 0x0FA8
_TITLE_TYPES = {0, 6}


class _PptText:
    def __init__(self, budget: Budget) -> None:
        self.slides: dict[int, list[str]] = {}
        self.notes: list[str] = []
        self.budget = budget
        self.slide_seen = 0
        self.records = 0

    def add(self, slide: int, text: str, text_type: int) -> None:
        text = text.replace("\r", "\n").replace("\x0b", "\n").strip()
        if not text or text == "*" or text.startswith("Click to edit Master"):
            return  # master placeholders (notes master is an ordinary Notes container)
        if slide < 0:
            self.notes.append(text)
            return
        self.slides.setdefault(slide, []).append(heading(3, text) if text_type in _TITLE_TYPES else text)

    def walk(self, buf: bytes, start: int, end: int, slide: int, in_slwt: int | None) -> None:
        pos = start
        text_type = 1
        while pos + 8 <= end:
            self.records += 1
            if self.records % 5000 == 0:
                self.budget.check()
            ver_inst, rec_type, length = struct.unpack_from("<HHI", buf, pos)
            body, pos = pos + 8, min(end, pos + 8 + length)
            if ver_inst & 0x000F == 0x000F:  # container
                if rec_type in (_RT_MAIN_MASTER, _RT_HANDOUT):
                    continue
                if rec_type == _RT_SLWT:
                    self.walk(buf, body, pos, -1 if ver_inst >> 4 == 2 else 0, ver_inst >> 4)
                elif rec_type == _RT_SLIDE:
                    self.slide_seen += 1
                    self.walk(buf, body, pos, self.slide_seen, None)
                elif rec_type == _RT_NOTES:
                    self.walk(buf, body, pos, -1, None)
                else:
                    self.walk(buf, body, pos, slide, in_slwt)
            elif rec_type == _RT_SLIDE_PERSIST and in_slwt is not None and slide >= 0:
                slide += 1
            elif rec_type == _RT_TEXT_HEADER and length >= 4:
                text_type = struct.unpack_from("<I", buf, body)[0]
            elif rec_type == _RT_TEXT_CHARS and in_slwt != 1:
                self.add(slide, buf[body:pos].decode("utf-16-le", errors="replace"), text_type)
            elif rec_type == _RT_TEXT_BYTES and in_slwt != 1:
                self.add(slide, buf[body:pos].decode("cp1252", errors="replace"), text_type)


def _parse_ppt(ole: olefile.OleFileIO, budget: Budget) -> tuple[TextSink, int]:
    stream = _stream(ole, "PowerPoint Document")
    if ole.exists("EncryptedSummary"):
        raise ParseError("PowerPoint document is encrypted")
    walker = _PptText(budget)
    walker.walk(stream, 0, len(stream), 0, None)
    sink = TextSink()
    for number in sorted(k for k in walker.slides if k > 0):
        sink.add(heading(2, f"Slide {number}"))
        for block in dict.fromkeys(walker.slides[number]):  # placeholder text can repeat in slide shapes
            sink.add(block)
    if walker.notes:
        sink.add(heading(2, "Notes"))
        for note in dict.fromkeys(walker.notes):
            sink.add(note)
    return sink, len([k for k in walker.slides if k > 0])


def parse_legacy(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    ole = _open_ole(data)
    try:
        pages: int | None = None
        if ext == ".ppt":
            sink, pages = _parse_ppt(ole, budget)
        else:
            sink = _parse_word(ole)
    except (struct.error, IndexError) as exc:
        raise ParseError(f"corrupt {ext} document") from exc
    finally:
        ole.close()
    return ParsedDocument(
        text=sink.text(), format=ext.lstrip("."), pages=pages, tables=sink.tables, warnings=sink.warnings()
    )
