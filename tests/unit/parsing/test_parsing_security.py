"""Hostile inputs: linked local files, XML entities, renamed and corrupt files."""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

import pytest
from parsing_testlib import PARSER_DOCS

from ctxstore.parsing import ParsedDocument, ParseError, classify, parse_document

SECRET = "de658225-569e-4e3d-9ed2-cfb6abf927fc"


@pytest.mark.skipif(not (PARSER_DOCS / "markitdown" / "rlink.docx").is_file(), reason="shared corpus absent")
def test_rlink_docx_does_not_pull_in_the_linked_local_file() -> None:
    linked = Path("/tmp/test_rlink.txt")  # the target rlink.docx points at (CVE-2025-11849)
    created = not linked.exists()
    if created:
        linked.write_text(SECRET)
    try:
        doc = parse_document("rlink.docx", (PARSER_DOCS / "markitdown" / "rlink.docx").read_bytes(), ".docx")
    finally:
        if created:
            linked.unlink()
    assert SECRET not in doc.text
    assert "ZGU2NTgyMjUtNTY5ZS00ZTNkLTllZDItY2ZiNmFiZjk" not in doc.text  # nor its base64


def test_xml_uploads_including_tika_xxe_are_rejected() -> None:
    assert classify("testXXE.xml", None) is None
    assert classify("testXXE.xml", "application/xml") is None
    assert classify("noext", "application/xml") is None


def _rewrite_zip(data: bytes, member: str, transform: object) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == member:
                body = transform(body)  # type: ignore[operator]
            dst.writestr(info, body)
    return out.getvalue()


def _with_doctype(xml: bytes, root: bytes, entities: bytes) -> bytes:
    """Insert a DOCTYPE right after the XML declaration."""
    decl_end = xml.index(b"?>") + 2 if xml.startswith(b"<?xml") else 0
    return xml[:decl_end] + b"<!DOCTYPE " + root + b" [" + entities + b"]>" + xml[decl_end:]


def _docx_with_entities(entities: bytes, marker: str, reference: bytes) -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(marker)
    buf = io.BytesIO()
    document.save(buf)

    def inject(xml: bytes) -> bytes:
        return _with_doctype(xml, b"w:document", entities).replace(marker.encode(), reference)

    return _rewrite_zip(buf.getvalue(), "word/document.xml", inject)


def _odt_with_entities(entities: bytes, marker: str, reference: bytes) -> bytes:
    from odf.opendocument import OpenDocumentText
    from odf.text import P

    document = OpenDocumentText()
    document.text.addElement(P(text=marker))
    buf = io.BytesIO()
    document.write(buf)

    def inject(xml: bytes) -> bytes:
        return _with_doctype(xml, b"office:document-content", entities).replace(marker.encode(), reference)

    return _rewrite_zip(buf.getvalue(), "content.xml", inject)


def _parse_or_error(name: str, data: bytes, ext: str) -> ParsedDocument | None:
    try:
        return parse_document(name, data, ext)
    except ParseError:
        return None  # refusing the document is as safe as ignoring the entity


@pytest.mark.parametrize(("ext", "build"), [(".docx", _docx_with_entities), (".odt", _odt_with_entities)])
def test_external_entities_are_never_resolved(tmp_path: Path, ext: str, build: object) -> None:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET)
    entity = b'<!ENTITY xxe SYSTEM "' + secret_file.as_uri().encode() + b'">'
    data = build(entity, "XXEMARKER", b"before &xxe; after")  # type: ignore[operator]
    doc = _parse_or_error(f"x{ext}", data, ext)
    if doc is not None:
        assert SECRET not in doc.text


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("ext", "build"), [(".docx", _docx_with_entities), (".odt", _odt_with_entities)])
def test_entity_expansion_bombs_are_not_expanded(ext: str, build: object) -> None:
    entities = b'<!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">'
    prev = b"a"
    for i in range(1, 10):
        name = f"e{i}".encode()
        entities += b"<!ENTITY " + name + b' "' + (b"&" + prev + b";") * 10 + b'">'
        prev = name
    data = build(entities, "BOMBMARKER", b"&" + prev + b";")  # type: ignore[operator]
    doc = _parse_or_error(f"x{ext}", data, ext)
    if doc is not None:
        assert len(doc.text) < 10_000


def _png_bytes() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), "white").save(buf, "PNG")
    return buf.getvalue()


RENAMED_TARGETS = [
    ".pdf", ".doc", ".dot", ".docx", ".docm", ".dotx", ".odt", ".ott", ".rtf",
    ".xls", ".xlsx", ".xlsm", ".xlsb", ".ods", ".ots", ".csv", ".tsv",
    ".ppt", ".pptx", ".pptm", ".odp", ".otp", ".pages", ".numbers", ".key",
    ".png", ".jpg", ".tif", ".webp", ".gif", ".bmp", ".txt", ".md", ".json",
]  # fmt: skip


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ext", RENAMED_TARGETS)
def test_random_bytes_renamed_to_a_supported_extension_raise_parse_error(ext: str) -> None:
    data = random.Random(ext).randbytes(8192)
    with pytest.raises(ParseError) as info:
        parse_document(f"x{ext}", data, ext)
    assert info.value.code == "E3001"


IMAGE_EXTS = (".png", ".jpg", ".tif", ".webp", ".gif", ".bmp")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ext", [e for e in RENAMED_TARGETS if e not in IMAGE_EXTS])
def test_png_renamed_to_another_format_raises_parse_error(ext: str) -> None:
    with pytest.raises(ParseError):
        parse_document(f"x{ext}", _png_bytes(), ext)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ext", [e for e in IMAGE_EXTS if e != ".png"])
def test_png_renamed_to_another_image_extension_is_still_read_as_an_image(ext: str) -> None:
    # Images are opened by their content, so a mislabelled image is OCR'd like any other (a blank page: no text).
    assert parse_document(f"x{ext}", _png_bytes(), ext).text.strip() == ""


def test_zip_that_is_not_an_office_document_raises_parse_error() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("hello.txt", "hello")
    for ext in (".docx", ".xlsx", ".pptx", ".odt", ".odp", ".pages", ".key", ".numbers"):
        with pytest.raises(ParseError):
            parse_document(f"x{ext}", buf.getvalue(), ext)


def test_declared_zip_bomb_is_refused_before_inflating() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", b"\0" * 1024)
    data = bytearray(buf.getvalue())
    central = data.rindex(b"PK\x01\x02")
    data[central + 24 : central + 28] = (3 * 1024**3).to_bytes(4, "little")  # declare 3 GiB uncompressed
    with pytest.raises(ParseError, match="size limit"):
        parse_document("bomb.docx", bytes(data), ".docx")


@pytest.mark.skipif(not PARSER_DOCS.is_dir(), reason="shared corpus absent")
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "rel", ["markitdown/test.docx", "markitdown/test.pdf", "markitdown/test.xlsx", "markitdown/test.pptx",
            "tika/testPPT.ppt", "docling/legacy_sample.doc", "tika/testNumbers.numbers"],
)  # fmt: skip
def test_truncated_documents_never_crash(rel: str) -> None:
    data = (PARSER_DOCS / rel).read_bytes()
    ext = classify(rel, None)
    assert ext is not None
    for size in (16, len(data) // 3, len(data) - 7):
        try:
            parse_document(rel, data[:size], ext)
        except ParseError:
            pass
