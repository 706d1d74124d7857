"""Spreadsheet formulas render as computed values, also when no application ever cached them."""

from __future__ import annotations

import io
from pathlib import Path

import openpyxl
import pytest
from parsing_testlib import normalise

from ctxstore.parsing import parse_document
from ctxstore.parsing.spreadsheet import has_uncached_formulas


def _workbook_with_uncached_formulas() -> bytes:
    wb = openpyxl.Workbook()  # openpyxl writes formulas without cached <v> values
    ws = wb.active
    assert ws is not None
    ws.title = "Data"
    ws.append(["Item", "Qty", "Price", "Total"])
    ws.append(["Widget", 3, 2.5, "=B2*C2"])
    ws.append(["Gadget", 4, 10, "=B3*C3"])
    ws.append(["Sum", "=SUM(B2:B3)", None, "=SUM(D2:D3)"])
    ws["F1"] = '=IF(D4>40,"large order","small order")'
    ws["F2"] = '=CONCATENATE(A2,"-",A3)'
    other = wb.create_sheet("Summary Sheet")
    other["A1"] = "Grand total"
    other["B1"] = "=Data!D4*2"
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


@pytest.mark.timeout(60)
def test_formulas_without_cached_values_are_computed() -> None:
    data = _workbook_with_uncached_formulas()
    assert has_uncached_formulas(data)
    doc = parse_document("calc.xlsx", data, ".xlsx")
    text = normalise(doc.text)
    assert "## Data" in doc.text and "## Summary Sheet" in doc.text
    assert doc.tables == 2
    assert "Widget 3 2.5 7.5" in text
    assert "Gadget 4 10 40" in text
    assert "Sum 7 47.5" in text
    assert "large order" in text
    assert "Widget-Gadget" in text
    assert "Grand total 95" in text
    assert "=" not in doc.text.replace("|---", "")  # no formula text leaked


def test_files_with_cached_values_use_them(tmp_path: Path) -> None:
    from parsing_testlib import PARSER_DOCS

    sample = PARSER_DOCS / "unstructured" / "stanley-cups.xlsx"
    if not sample.is_file():
        pytest.skip("shared corpus absent")
    assert not has_uncached_formulas(sample.read_bytes())


def test_every_sheet_becomes_a_headed_markdown_table() -> None:
    wb = openpyxl.Workbook()
    first = wb.active
    assert first is not None
    first.title = "One"
    first.append(["a", "b"])
    first.append([1, "x|y"])
    wb.create_sheet("Two").append(["only"])
    buf = io.BytesIO()
    wb.save(buf)
    doc = parse_document("s.xlsx", buf.getvalue(), ".xlsx")
    assert doc.text == "## One\n\n| a | b |\n|---|---|\n| 1 | x\\|y |\n\n## Two\n\n| only |\n|---|"
