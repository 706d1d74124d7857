"""CSV and TSV rendered as one markdown table."""

from __future__ import annotations

import csv
import io

from .markdown import table
from .model import MAX_SHEET_CELLS, ParsedDocument
from .text import decode_text


def _dialect(sample: str, ext: str) -> type[csv.Dialect] | csv.Dialect:
    if ext == ".tsv":
        return csv.excel_tab
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return csv.excel


def parse_delimited(data: bytes, ext: str) -> ParsedDocument:
    text = decode_text(data)
    csv.field_size_limit(10_000_000)
    reader = csv.reader(io.StringIO(text, newline=""), _dialect(text[:20_000], ext))
    rows: list[list[str]] = []
    cells = 0
    warnings: list[str] = []
    for row in reader:
        cells += len(row)
        if cells > MAX_SHEET_CELLS:
            warnings.append(f"table truncated at {MAX_SHEET_CELLS} cells")
            break
        rows.append(row)
    width = max((len(r) for r in rows), default=0)
    rendered = table([r + [""] * (width - len(r)) for r in rows])
    return ParsedDocument(text=rendered, format=ext.lstrip("."), tables=1 if rendered else 0, warnings=warnings)
