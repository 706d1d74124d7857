"""RTF via striprtf (text only; RTF has no reliable heading structure to recover)."""

from __future__ import annotations

import re

from striprtf.striprtf import rtf_to_text

from .markdown import table
from .model import MAX_TEXT_CHARS, ParsedDocument, ParseError

_CODEPAGE = re.compile(rb"\\ansicpg(\d+)")


def parse_rtf(data: bytes) -> ParsedDocument:
    head = data[:64].lstrip()
    if not head.startswith(b"{\\rtf"):
        raise ParseError("not an RTF document")
    match = _CODEPAGE.search(data[:4096])
    encoding = f"cp{match.group(1).decode()}" if match else "cp1252"
    try:
        "".encode(encoding)
    except LookupError:
        encoding = "cp1252"
    # RTF is 7-bit; latin-1 maps bytes 1:1 and striprtf decodes \'hh escapes with the declared code page.
    text: str = rtf_to_text(data.decode("latin-1"), encoding=encoding, errors="replace")  # type: ignore[no-untyped-call]
    warnings: list[str] = []
    if len(text) > MAX_TEXT_CHARS:
        text, warnings = text[:MAX_TEXT_CHARS], [f"text truncated at {MAX_TEXT_CHARS} characters"]
    blocks, tables = _with_tables([line.rstrip() for line in text.replace("\r\n", "\n").split("\n")])
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(blocks))
    return ParsedDocument(text=text.strip(), format="rtf", tables=tables, warnings=warnings)


def _with_tables(lines: list[str]) -> tuple[list[str], int]:
    """striprtf ends every table cell with '|'; runs of such lines become markdown tables."""
    out: list[str] = []
    rows: list[list[str]] = []
    tables = 0

    def flush() -> None:
        nonlocal tables
        if rows:
            width = max(len(r) for r in rows)
            out.extend(["", table([r + [""] * (width - len(r)) for r in rows]), ""])
            tables += 1
            rows.clear()

    for line in lines:
        if line.endswith("|"):
            rows.append(line[:-1].split("|"))
        else:
            flush()
            out.append(line)
    flush()
    return out, tables
