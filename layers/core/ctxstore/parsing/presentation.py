"""PowerPoint 2007+ (.pptx, .pptm) via python-pptx: one `## Slide N` section per slide with its titles,
text, tables, chart data, picture alt text and speaker notes."""

from __future__ import annotations

import io
from typing import Any

import pptx
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER

from .archive import open_zip
from .markdown import cell_text, heading, table
from .model import Budget, ParsedDocument, TextSink

Shape = Any  # python-pptx shapes are untyped

_TITLES = {PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE}


def _text_frame(frame: Any) -> str:
    lines = []
    for para in frame.paragraphs:
        text = "".join(run.text for run in para.runs) or para.text
        if text.strip():
            lines.append(("  " * para.level + "- " if para.level else "") + text.strip())
    return "\n".join(lines)


def _chart(chart: Any) -> str:
    parts = []
    if chart.has_title and chart.chart_title.has_text_frame:
        parts.append(f"Chart: {chart.chart_title.text_frame.text}")
    for plot in chart.plots:
        categories = [cell_text(c) for c in plot.categories]
        series = list(plot.series)
        if not series:
            continue
        rows: list[list[str]] = [["", *[s.name or "" for s in series]]]
        values = [list(s.values) for s in series]
        for i, cat in enumerate(categories or [str(i + 1) for i in range(len(values[0]))]):
            rows.append([cat, *[cell_text(v[i]) if i < len(v) else "" for v in values]])
        parts.append(table(rows))
    return "\n\n".join(p for p in parts if p)


class _Slides:
    def __init__(self, budget: Budget) -> None:
        self.sink = TextSink()
        self.budget = budget

    def shape(self, shape: Shape) -> None:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            for child in shape.shapes:
                self.shape(child)
            return
        if shape.is_placeholder and shape.placeholder_format.type in _TITLES and shape.has_text_frame:
            self.sink.add(heading(3, shape.text_frame.text))
            return
        if getattr(shape, "has_table", False) and shape.has_table:
            rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
            rendered = table(rows)
            if rendered:
                self.sink.tables += 1
                self.sink.add(rendered)
            return
        if getattr(shape, "has_chart", False) and shape.has_chart:
            self.sink.add(_chart(shape.chart))
            return
        if shape.has_text_frame:
            self.sink.add(_text_frame(shape.text_frame))
        if shape.shape_type == MSO_SHAPE_TYPE.PICTURE:
            alt = shape._element._nvXxPr.cNvPr.get("descr") or ""
            if alt.strip():
                self.sink.add(f"![{' '.join(alt.split())}](image)")


def parse_presentation(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    open_zip(data)
    deck = pptx.Presentation(io.BytesIO(data))
    slides = _Slides(budget)
    count = 0
    for count, slide in enumerate(deck.slides, start=1):
        budget.check()
        if slides.sink.full:
            break
        slides.sink.add(heading(2, f"Slide {count}"))
        for shape in slide.shapes:
            slides.shape(shape)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                slides.sink.add("### Notes")
                slides.sink.add(notes)
    sink = slides.sink
    return ParsedDocument(
        text=sink.text(), format=ext.lstrip("."), pages=count, tables=sink.tables, warnings=sink.warnings()
    )
