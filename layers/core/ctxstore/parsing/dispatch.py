"""Routes an accepted extension to its format parser and turns every library failure into ParseError."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .model import Budget, ParsedDocument, ParseError

log = logging.getLogger(__name__)

Parser = Callable[[bytes, str, Budget], ParsedDocument]


def _route(ext: str) -> Parser:
    # Imports are lazy so a text upload does not pay for pdfium, pycel or protobuf start-up.
    if ext in (".txt", ".md", ".markdown", ".json"):
        from .text import parse_text

        return lambda data, e, _b: parse_text(data, e)
    if ext in (".csv", ".tsv"):
        from .delimited import parse_delimited

        return lambda data, e, _b: parse_delimited(data, e)
    if ext in (".xls", ".xlsx", ".xlsm", ".xlsb", ".ods", ".ots"):
        from .spreadsheet import parse_spreadsheet

        return parse_spreadsheet
    if ext in (".docx", ".docm", ".dotx"):
        from .word import parse_word

        return parse_word
    if ext in (".doc", ".dot", ".ppt"):
        from .legacy_office import parse_legacy

        return parse_legacy
    if ext in (".pptx", ".pptm"):
        from .presentation import parse_presentation

        return parse_presentation
    if ext in (".odt", ".ott", ".odp", ".otp"):
        from .odf import parse_odf

        return parse_odf
    if ext == ".rtf":
        from .rtf import parse_rtf

        return lambda data, e, _b: parse_rtf(data)
    if ext in (".pages", ".numbers", ".key"):
        from .iwork import parse_iwork

        return parse_iwork
    if ext == ".pdf":
        from .pdf import parse_pdf

        return parse_pdf
    if ext in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".gif", ".bmp"):
        from .image_ocr import parse_image

        return parse_image
    raise ParseError(f"unsupported format {ext!r}", code="E1002")


def parse_document(filename: str, data: bytes, ext: str, time_budget_s: float | None = None) -> ParsedDocument:
    """Parse one upload already accepted by `classify`. Raises ParseError (code E3001) on any failure."""
    ext = ext.lower() if ext.startswith(".") else "." + ext.lower()
    parser = _route(ext)
    budget = Budget() if time_budget_s is None else Budget(time_budget_s)
    try:
        doc = parser(data, ext, budget)
    except ParseError:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # libraries raise anything (and pyo3 panics are BaseException)
        log.info("parse failed for %s as %s: %r", filename, ext, exc)
        raise ParseError(f"cannot parse {ext} file: {type(exc).__name__}: {exc}"[:500]) from exc
    doc.text = doc.text.strip()
    return doc
