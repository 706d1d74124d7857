"""The upload format check: extension first, Content-Type only without an extension."""

from __future__ import annotations

import pytest

from ctxstore.parsing import ACCEPTED_EXTENSIONS, REJECTED_EXTENSIONS, classify


def test_extension_sets_match_the_spec() -> None:
    assert len(ACCEPTED_EXTENSIONS) == 37  # 9 documents, 8 sheets, 5 decks, 3 iWork, 8 images, 4 text
    assert {
        ".heic", ".heif", ".avif", ".svg", ".ico", ".html", ".htm", ".xml", ".eml", ".msg", ".epub", ".wpd", ".zip",
    } == REJECTED_EXTENSIONS  # fmt: skip
    assert not ACCEPTED_EXTENSIONS & REJECTED_EXTENSIONS


@pytest.mark.parametrize(
    ("filename", "content_type", "expected"),
    [
        ("Report.PDF", None, ".pdf"),
        ("report.pdf", "image/png", ".pdf"),  # the extension wins over the part's Content-Type
        ("dir/sub/file.Docx", None, ".docx"),
        ("C:\\docs\\sheet.xlsb", None, ".xlsb"),
        ("photo.jpeg", None, ".jpeg"),
        ("notes.markdown", None, ".markdown"),
        ("noext", "application/pdf", ".pdf"),
        ("noext", "text/plain; charset=utf-8", ".txt"),
        ("noext", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", ".xlsx"),
        ("noext", "IMAGE/JPEG", ".jpg"),
        (".bashrc", "text/markdown", ".md"),
        ("noext", None, None),
        ("noext", "application/octet-stream", None),
        ("noext", "text/html", None),
        ("page.html", "text/plain", None),
        ("archive.zip", "application/pdf", None),
        ("program.exe", "application/pdf", None),
        ("archive.tar.gz", None, None),
        ("trailingdot.", "application/pdf", ".pdf"),
    ],
)
def test_classify(filename: str, content_type: str | None, expected: str | None) -> None:
    assert classify(filename, content_type) == expected


@pytest.mark.parametrize("ext", sorted(REJECTED_EXTENSIONS))
def test_rejected_extensions_are_refused_whatever_the_content_type(ext: str) -> None:
    assert classify(f"file{ext}", "application/pdf") is None
