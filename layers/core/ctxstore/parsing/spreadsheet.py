"""Workbooks (xls, xlsx, xlsm, xlsb, ods, ots): one `## sheet` heading and one markdown table per sheet.

Values come from python-calamine, which reads the values cached in the file. Files written by libraries
(openpyxl, ...) carry formulas without cached values; for xlsx/xlsm those are computed with pycel.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable, Sequence

import python_calamine

from .archive import open_zip, read_member
from .markdown import cell_text, heading, table
from .model import MAX_SHEET_CELLS, Budget, ParsedDocument, ParseError, TextSink
from .odf_macros import basic_macros

Sheet = tuple[str, list[list[str]]]

# A formula cell whose <f> is followed by no cached <v>, or an empty one (openpyxl writes <v></v>).
_UNCACHED_FORMULA = re.compile(rb"(?:</f>|<f[^>]*/>)\s*(?:<v\s*/>|<v>\s*</v>)?\s*</c>")


class _CellBudget:
    def __init__(self, budget: Budget) -> None:
        self.left = MAX_SHEET_CELLS
        self.budget = budget
        self.truncated = False

    def take_rows(self, rows: Iterable[Sequence[object]]) -> list[list[str]]:
        out: list[list[str]] = []
        for i, row in enumerate(rows):
            if i % 1000 == 0:
                self.budget.check()
            self.left -= max(1, len(row))
            if self.left < 0:
                self.truncated = True
                break
            out.append([cell_text(v) for v in row])
        return out


def _calamine_sheets(data: bytes, cells: _CellBudget, warnings: list[str]) -> list[Sheet]:
    workbook = python_calamine.CalamineWorkbook.from_filelike(io.BytesIO(data))
    sheets: list[Sheet] = []
    for name in workbook.sheet_names:
        try:
            rows = workbook.get_sheet_by_name(name).iter_rows()
            sheets.append((name, cells.take_rows(rows)))
        except python_calamine.CalamineError as exc:  # chart sheets, dialog sheets
            warnings.append(f"sheet {name!r} skipped: {exc}")
        if cells.truncated:
            break
    return sheets


def _pyxlsb_sheets(data: bytes, cells: _CellBudget) -> list[Sheet]:
    """Fallback for xlsb files whose workbook part calamine cannot index: read each sheet part directly."""
    from pyxlsb.stringtable import StringTable
    from pyxlsb.worksheet import Worksheet

    zf = open_zip(data)
    names = zf.namelist()
    strings = None
    if "xl/sharedStrings.bin" in names:
        strings = StringTable(io.BytesIO(read_member(zf, "xl/sharedStrings.bin")))
    parts = sorted(
        (n for n in names if re.fullmatch(r"xl/worksheets/sheet\d+\.bin", n)),
        key=lambda n: int(re.sub(r"\D", "", n.rsplit("/", 1)[1])),
    )
    sheets: list[Sheet] = []
    for part in parts:
        ws = Worksheet(part, io.BytesIO(read_member(zf, part)), stringtable=strings)
        grid: dict[tuple[int, int], object] = {}
        for row in ws.rows(sparse=True):
            for c in row:
                if c.v is not None:
                    grid[(c.r, c.c)] = c.v
        title = part.rsplit("/", 1)[1].removesuffix(".bin").replace("sheet", "Sheet ")
        sheets.append((title, cells.take_rows(_dense(grid))))
    return sheets


def _dense(grid: dict[tuple[int, int], object]) -> list[list[object]]:
    if not grid:
        return []
    nrows = max(r for r, _ in grid) + 1
    ncols = max(c for _, c in grid) + 1
    return [[grid.get((r, c)) for c in range(ncols)] for r in range(nrows)]


def has_uncached_formulas(data: bytes) -> bool:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        for name in zf.namelist():
            is_sheet = name.startswith("xl/worksheets/") and name.endswith(".xml")
            if is_sheet and _UNCACHED_FORMULA.search(read_member(zf, name, 200_000_000)):
                return True
    except (zipfile.BadZipFile, OSError, KeyError):
        return False
    return False


def _pycel_sheets(data: bytes, cells: _CellBudget, warnings: list[str]) -> list[Sheet]:
    """Compute formulas that no spreadsheet application has cached (files written by libraries)."""
    import openpyxl
    from pycel import ExcelCompiler

    workbook = openpyxl.load_workbook(io.BytesIO(data), data_only=False)
    compiler = ExcelCompiler(excel=workbook)
    failed = 0
    sheets: list[Sheet] = []
    for ws in workbook.worksheets:
        rows: list[list[object]] = []
        for i, row in enumerate(ws.iter_rows()):
            if i % 200 == 0:
                cells.budget.check()
            values: list[object] = []
            for cell in row:
                value = cell.value
                if cell.data_type == "f" or isinstance(value, openpyxl.worksheet.formula.ArrayFormula):
                    try:
                        value = compiler.evaluate(f"'{ws.title}'!{cell.coordinate}")
                    except Exception:
                        failed += 1
                        value = getattr(value, "text", value)
                values.append(value)
            rows.append(values)
        sheets.append((ws.title, cells.take_rows(rows)))
        if cells.truncated:
            break
    if failed:
        warnings.append(f"{failed} formula(s) could not be computed; shown as formulas")
    return sheets


def parse_spreadsheet(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    warnings: list[str] = []
    cells = _CellBudget(budget)
    sheets: list[Sheet]
    if ext in (".xlsx", ".xlsm") and has_uncached_formulas(data):
        sheets = _pycel_sheets(data, cells, warnings)
    else:
        try:
            sheets = _calamine_sheets(data, cells, warnings)
        except python_calamine.PasswordError as exc:
            raise ParseError("workbook is password protected") from exc
        except BaseException as exc:  # calamine panics (pyo3 PanicException) on some malformed parts
            if isinstance(exc, KeyboardInterrupt | SystemExit) or ext != ".xlsb":
                raise
            sheets = _pyxlsb_sheets(data, cells)
    sink = TextSink()
    for name, rows in sheets:
        sink.add(heading(2, name))
        rendered = table(rows)
        if rendered:
            sink.tables += 1
            sink.add(rendered)
    if ext in (".ods", ".ots"):
        sink.add(basic_macros(data))
    if cells.truncated:
        warnings.append(f"sheets truncated at {MAX_SHEET_CELLS} cells")
    return ParsedDocument(
        text=sink.text(), format=ext.lstrip("."), tables=sink.tables, warnings=warnings + sink.warnings()
    )
