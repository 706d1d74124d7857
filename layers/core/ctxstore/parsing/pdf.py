"""PDF via pypdfium2 (fast, permissive licence); pages without a text layer are OCRed."""

from __future__ import annotations

import threading

import pypdfium2 as pdfium

from .image_ocr import ocr_image
from .model import MAX_OCR_PAGES, Budget, ParsedDocument, ParseError, TextSink

# PDFium is not thread-safe; the pipeline may parse documents from several threads.
_PDFIUM_LOCK = threading.Lock()
_OCR_SCALE = 200 / 72  # render scanned pages at 200 dpi


def parse_pdf(data: bytes, ext: str, budget: Budget) -> ParsedDocument:
    if b"%PDF" not in data[:1024]:
        raise ParseError("not a PDF document")
    sink = TextSink()
    warnings: list[str] = []
    ocr_pages = 0
    with _PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise ParseError(f"unreadable or encrypted PDF: {exc}") from exc
        try:
            count = len(pdf)
            for index in range(count):
                budget.check()
                if sink.full:
                    break
                page = pdf[index]
                try:
                    textpage = page.get_textpage()
                    text = textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n")
                    textpage.close()
                    if len(text.strip()) < 5:
                        if ocr_pages < MAX_OCR_PAGES:
                            ocr_pages += 1
                            bitmap = page.render(scale=_OCR_SCALE, grayscale=True)
                            text = ocr_image(bitmap.to_pil(), budget)
                            bitmap.close()
                        else:
                            warnings.append(f"OCR limited to {MAX_OCR_PAGES} scanned pages")
                finally:
                    page.close()
                sink.add(text.strip())
        finally:
            pdf.close()
    if ocr_pages:
        warnings.append(f"{ocr_pages} page(s) without a text layer were OCRed")
    return ParsedDocument(text=sink.text(), format="pdf", pages=count, warnings=warnings + sink.warnings())
