"""Plain text, markdown and JSON, with encoding detection (BOMs, BOM-less UTF-16, legacy code pages)."""

from __future__ import annotations

import codecs
import json

from charset_normalizer import from_bytes

from .model import MAX_TEXT_CHARS, ParsedDocument, ParseError

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _bomless_utf16(data: bytes) -> str | None:
    """UTF-16 without a BOM shows as NUL bytes on one parity (mostly-ASCII text)."""
    sample = data[:4096]
    if len(sample) < 4:
        return None
    even = sample[0::2].count(0) / max(1, len(sample[0::2]))
    odd = sample[1::2].count(0) / max(1, len(sample[1::2]))
    if even > 0.3 and odd < 0.05:
        return "utf-16-be"
    if odd > 0.3 and even < 0.05:
        return "utf-16-le"
    return None


def decode_text(data: bytes) -> str:
    """Decode bytes to str; raises ParseError when the bytes are evidently not text."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(enc, errors="replace")
    enc16 = _bomless_utf16(data)
    if enc16:
        return data.decode(enc16, errors="replace")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        best = from_bytes(data[:200_000]).best()
        encoding = best.encoding if best is not None else "cp1252"
        text = data.decode(encoding, errors="replace")
    _reject_binary(text)
    return text


def _reject_binary(text: str) -> None:
    sample = text[:8192]
    if not sample:
        return
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if "\x00" in sample or controls / len(sample) > 0.05:
        raise ParseError("file is binary, not text")


def parse_text(data: bytes, ext: str) -> ParsedDocument:
    text = decode_text(data[: MAX_TEXT_CHARS * 4])
    warnings: list[str] = []
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS]
        warnings.append(f"text truncated at {MAX_TEXT_CHARS} characters")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if ext == ".json" and text.strip():
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ParseError(f"invalid JSON: {exc}") from exc
        # Pretty-printed so keys and values land on their own lines for chunking.
        text = "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```"
    return ParsedDocument(text=text.strip("\n"), format=ext.lstrip("."), warnings=warnings)
