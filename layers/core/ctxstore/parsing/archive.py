"""Zip containers (OOXML, ODF, iWork) opened with bomb checks before any library inflates them."""

from __future__ import annotations

import io
import zipfile

from lxml import etree

from .model import MAX_ZIP_MEMBERS, MAX_ZIP_UNCOMPRESSED, ParseError


def open_zip(data: bytes) -> zipfile.ZipFile:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ParseError("not a valid zip-based document") from exc
    infos = zf.infolist()
    if len(infos) > MAX_ZIP_MEMBERS:
        raise ParseError("too many entries in the document container")
    if sum(i.file_size for i in infos) > MAX_ZIP_UNCOMPRESSED:
        raise ParseError("document container inflates beyond the size limit")
    return zf


def read_member(zf: zipfile.ZipFile, name: str, limit: int = MAX_ZIP_UNCOMPRESSED) -> bytes:
    """Read one entry, refusing to inflate past `limit` even when the declared size lies."""
    with zf.open(name) as fh:
        out = fh.read(limit + 1)
    if len(out) > limit:
        raise ParseError(f"{name} inflates beyond the size limit")
    return out


def safe_xml_parser() -> etree.XMLParser:
    """lxml parser that never resolves entities, loads DTDs or touches the network."""
    return etree.XMLParser(
        resolve_entities=False, load_dtd=False, no_network=True, huge_tree=False, remove_comments=True
    )


def parse_xml(data: bytes) -> etree._Element:
    try:
        return etree.fromstring(data, parser=safe_xml_parser())
    except etree.XMLSyntaxError as exc:
        raise ParseError(f"malformed XML: {exc}") from exc
