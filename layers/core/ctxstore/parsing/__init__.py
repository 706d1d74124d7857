"""Document parsing for the ingestion pipeline: bytes of an accepted upload in, markdown text out."""

from __future__ import annotations

from .dispatch import parse_document
from .formats import ACCEPTED_EXTENSIONS, REJECTED_EXTENSIONS, classify
from .model import ParsedDocument, ParseError

__all__ = [
    "ACCEPTED_EXTENSIONS",
    "REJECTED_EXTENSIONS",
    "ParseError",
    "ParsedDocument",
    "classify",
    "parse_document",
]
