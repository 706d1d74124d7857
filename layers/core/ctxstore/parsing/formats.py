"""Upload format check: which files the ingest accepts, decided by extension (Content-Type only without one)."""

from __future__ import annotations

ACCEPTED_EXTENSIONS: frozenset[str] = frozenset(
    {
        # documents
        ".pdf", ".doc", ".docx", ".docm", ".dot", ".dotx", ".odt", ".ott", ".rtf",
        # spreadsheets
        ".xls", ".xlsx", ".xlsm", ".xlsb", ".ods", ".ots", ".csv", ".tsv",
        # presentations
        ".ppt", ".pptx", ".pptm", ".odp", ".otp",
        # iWork
        ".pages", ".numbers", ".key",
        # images (OCR)
        ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".gif", ".bmp",
        # plain text
        ".txt", ".md", ".markdown", ".json",
    }
)  # fmt: skip

REJECTED_EXTENSIONS: frozenset[str] = frozenset(
    {".heic", ".heif", ".avif", ".svg", ".ico", ".html", ".htm", ".xml", ".eml", ".msg", ".epub", ".wpd", ".zip"}
)

_OOXML = "application/vnd.openxmlformats-officedocument"
_ODF = "application/vnd.oasis.opendocument"

MIME_TO_EXTENSION: dict[str, str] = {
    "application/pdf": ".pdf",
    "application/x-pdf": ".pdf",
    "application/msword": ".doc",
    f"{_OOXML}.wordprocessingml.document": ".docx",
    f"{_OOXML}.wordprocessingml.template": ".dotx",
    "application/vnd.ms-word.document.macroenabled.12": ".docm",
    "application/vnd.ms-word.template.macroenabled.12": ".dotx",
    f"{_ODF}.text": ".odt",
    f"{_ODF}.text-template": ".ott",
    "application/rtf": ".rtf",
    "text/rtf": ".rtf",
    "application/vnd.ms-excel": ".xls",
    f"{_OOXML}.spreadsheetml.sheet": ".xlsx",
    "application/vnd.ms-excel.sheet.macroenabled.12": ".xlsm",
    "application/vnd.ms-excel.sheet.binary.macroenabled.12": ".xlsb",
    f"{_ODF}.spreadsheet": ".ods",
    f"{_ODF}.spreadsheet-template": ".ots",
    "text/csv": ".csv",
    "application/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "application/vnd.ms-powerpoint": ".ppt",
    f"{_OOXML}.presentationml.presentation": ".pptx",
    "application/vnd.ms-powerpoint.presentation.macroenabled.12": ".pptm",
    f"{_ODF}.presentation": ".odp",
    f"{_ODF}.presentation-template": ".otp",
    "application/vnd.apple.pages": ".pages",
    "application/x-iwork-pages-sffpages": ".pages",
    "application/vnd.apple.numbers": ".numbers",
    "application/x-iwork-numbers-sffnumbers": ".numbers",
    "application/vnd.apple.keynote": ".key",
    "application/x-iwork-keynote-sffkey": ".key",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/pjpeg": ".jpg",
    "image/tiff": ".tif",
    "image/webp": ".webp",
    "image/gif": ".gif",
    "image/bmp": ".bmp",
    "image/x-bmp": ".bmp",
    "image/x-ms-bmp": ".bmp",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "application/json": ".json",
    "text/json": ".json",
}


def extension_of(filename: str) -> str:
    """Lower-cased extension of the last path component, '' when there is none (a leading dot does not count)."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    stem, dot, ext = base.rpartition(".")
    if not dot or not stem.strip(".") or not ext:
        return ""
    return "." + ext.lower()


def classify(filename: str, content_type: str | None) -> str | None:
    """The accepted extension to parse the file as, or None when the upload must be rejected (E1002)."""
    ext = extension_of(filename or "")
    if ext:
        return ext if ext in ACCEPTED_EXTENSIONS else None
    if not content_type:
        return None
    mime = content_type.split(";", 1)[0].strip().lower()
    return MIME_TO_EXTENSION.get(mime)
