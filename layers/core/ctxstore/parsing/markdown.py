"""Small markdown rendering helpers shared by the format parsers."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence


def cell_text(value: object) -> str:
    """Render one cell value: integral floats without '.0', dates in ISO form, booleans as Excel shows them."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if math.isfinite(value):
            value = float(f"{value:.15g}")  # Excel's display precision hides binary noise like 12.000000000000002
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ") if value.time() != dt.time() else value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _escape(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def trim_grid(rows: Sequence[Sequence[str]]) -> list[list[str]]:
    """Drop leading and trailing empty rows and columns so sparse sheets do not render as walls of pipes."""
    grid = [list(r) for r in rows]
    while grid and not any(c.strip() for c in grid[-1]):
        grid.pop()
    width = 0
    for r in grid:
        for i in range(len(r) - 1, -1, -1):
            if r[i].strip():
                width = max(width, i + 1)
                break
    while grid and not any(c.strip() for c in grid[0]):
        grid.pop(0)
    start = min((next(i for i, c in enumerate(r) if c.strip()) for r in grid if any(c.strip() for c in r)), default=0)
    return [(r + [""] * width)[start:width] for r in grid]


def table(rows: Sequence[Sequence[str]]) -> str:
    """A markdown pipe table; the first row is the header."""
    grid = trim_grid(rows)
    if not grid or not grid[0]:
        return ""
    width = len(grid[0])
    lines = ["| " + " | ".join(_escape(c) for c in grid[0]) + " |", "|" + "---|" * width]
    lines.extend("| " + " | ".join(_escape(c) for c in r) + " |" for r in grid[1:])
    return "\n".join(lines)


def heading(level: int, text: str) -> str:
    text = " ".join(text.split())
    return f"{'#' * max(1, min(level, 6))} {text}" if text else ""
