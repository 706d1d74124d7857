"""Images (.png .jpg .jpeg .tif .tiff .webp .gif .bmp) read by OCR: Debian tesseract-ocr through pytesseract.

Also used by the PDF parser for pages without a text layer. Textual image metadata (EXIF/PNG/GIF
descriptions and comments) is appended because it is content the file carries, not derived guesses.
"""

from __future__ import annotations

import io
import os
import shutil
from typing import Any

from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

from .model import MAX_IMAGE_PIXELS, MAX_OCR_PAGES, Budget, ParsedDocument, ParseError

# Tesseract's OpenMP threads fight each other on small machines; one thread per call is fastest here.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

# Item error code of an image (or scanned PDF page) on a server without tesseract: an installation matter, not a
# bad file (E3001), and `serve` says so at start (ocr_available).
OCR_UNAVAILABLE = "E3002"

_MIN_WIDTH = 1200  # small scans are upscaled: tesseract wants ~20-30 px glyphs
_MAX_SIDE = 4000  # larger pages are downscaled to bound OCR time

_EXIF_TEXT_TAGS = {270: "Description", 315: "Artist", 33432: "Copyright", 40091: "Title", 40092: "Comment",
                   40093: "Author", 40094: "Keywords", 40095: "Subject"}  # fmt: skip
_INFO_TEXT_KEYS = ("Title", "Description", "Comment", "comment", "Author", "Subject", "Keywords")
_EXIF_IFD = 0x8769
_EXIF_DATE_ORIGINAL = 36867
# XMP properties worth indexing (Dublin Core and common free-form ones), by case-sensitive local name:
# `Description` (capitalised) is the rdf:Description container, not a property.
_XMP_TEXT_KEYS = {
    "title": "Title",
    "description": "Description",
    "creator": "Author",
    "Author": "Author",
    "subject": "Keywords",
    "rights": "Copyright",
    "Headline": "Title",
    "Caption": "Description",
}


def _prepare(frame: Image.Image) -> Image.Image:
    img = ImageOps.exif_transpose(frame) or frame
    img = img.convert("L")
    w, h = img.size
    if w < _MIN_WIDTH:
        factor = min(4.0, _MIN_WIDTH / max(1, w))
        img = img.resize((int(w * factor), int(h * factor)), Image.Resampling.LANCZOS)
    elif max(w, h) > _MAX_SIDE:
        img.thumbnail((_MAX_SIDE, _MAX_SIDE), Image.Resampling.LANCZOS)
    return img


# The program pytesseract runs by default. pytesseract itself loads on the first image: it imports pandas when
# installed (1.5 s), which `serve` should not pay at start for this check.
TESSERACT = "tesseract"


def ocr_available() -> bool:
    """Whether the tesseract program can be found."""
    return shutil.which(TESSERACT) is not None


def ocr_image(img: Image.Image, budget: Budget) -> str:
    import pytesseract

    remaining = budget.remaining()
    if remaining <= 1:
        raise ParseError("parse time budget exceeded before OCR")
    try:
        text = pytesseract.image_to_string(_prepare(img), lang="eng", timeout=remaining)
    except pytesseract.TesseractNotFoundError as exc:
        raise ParseError(
            "OCR is unavailable on this server (tesseract is not installed): images and scanned pages cannot be read",
            code=OCR_UNAVAILABLE,
        ) from exc
    except RuntimeError as exc:  # pytesseract reports its timeout as RuntimeError
        raise ParseError(f"OCR failed: {exc}") from exc
    lines = [" ".join(line.split()) for line in str(text).splitlines()]
    out: list[str] = []
    for line in lines:  # collapse runs of blank lines
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _xmp_strings(value: Any) -> list[str]:
    """Leaf strings of one XMP property as Pillow's getxmp() renders it (Alt/Seq/Bag of li, lang maps)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _xmp_strings(v)]
    if isinstance(value, dict):
        if "text" in value:
            return _xmp_strings(value["text"])
        return [s for k, v in value.items() if k not in ("lang", "about") for s in _xmp_strings(v)]
    return []


def _xmp(img: Image.Image) -> list[str]:
    try:
        tree = img.getxmp() if hasattr(img, "getxmp") else {}
    except Exception:  # malformed XMP is ignored: the pixels are still read
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, dict):
            for key, value in node.items():
                label = _XMP_TEXT_KEYS.get(key)
                if label:
                    found.extend(f"{label}: {t.strip()}" for t in _xmp_strings(value) if t.strip())
                else:
                    walk(value)

    walk(tree)
    return found


def _metadata(img: Image.Image) -> list[str]:
    found: list[str] = []
    exif = img.getexif()
    for tag, label in _EXIF_TEXT_TAGS.items():
        value = exif.get(tag)
        if isinstance(value, bytes):  # XP* tags are UTF-16LE
            value = value.decode("utf-16-le", errors="ignore")
        if isinstance(value, str) and value.strip("\x00 "):
            found.append(f"{label}: {value.strip(chr(0) + ' ')}")
    found.extend(_xmp(img))
    for key in _INFO_TEXT_KEYS:
        value = img.info.get(key)
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="ignore")
        if isinstance(value, str) and value.strip():
            found.append(f"{key.capitalize()}: {value.strip()}")
    taken = exif.get_ifd(_EXIF_IFD).get(_EXIF_DATE_ORIGINAL)
    if found and isinstance(taken, str) and taken.strip("\x00 "):  # a date alone is not text content
        found.append(f"Date taken: {taken.strip(chr(0) + ' ')}")
    return list(dict.fromkeys(found))


def parse_image(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    try:
        img = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ParseError("not a readable image") from exc
    w, h = img.size
    if w * h > MAX_IMAGE_PIXELS:
        raise ParseError(f"image too large ({w}x{h})")
    warnings: list[str] = []
    texts: list[str] = []
    frames = 0
    # Multi-page TIFFs are documents; GIF/WebP animation frames repeat, so only their first frame is read.
    multipage = ext in (".tif", ".tiff")
    for frames, frame in enumerate(ImageSequence.Iterator(img), start=1):
        if frames > MAX_OCR_PAGES:
            warnings.append(f"OCR limited to the first {MAX_OCR_PAGES} pages")
            break
        text = ocr_image(frame, budget)
        if text:
            texts.append(text)
        if not multipage:
            break
    meta = _metadata(img)
    if meta:
        texts.append("## Image metadata\n\n" + "\n".join(f"- {m}" for m in meta))
    if not texts:
        warnings.append("no text found in image")
    return ParsedDocument(text="\n\n".join(texts), format=ext.lstrip("."), pages=frames, warnings=warnings)
