"""Text of WordprocessingML elements (shared by the .docx parser for body, tables, comments and notes)."""

from __future__ import annotations

from lxml import etree

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"

# Deleted revisions, the duplicate fallback of alternate content, field codes and properties carry no body text.
_SKIP = {W + "del", W + "pPr", W + "rPr", W + "instrText", W + "delText", MC + "Fallback", W + "tblPr", W + "sectPr"}


def _math(el: etree._Element) -> str:
    return "".join(t.text or "" for t in el.iter(M + "t"))


def inline_text(el: etree._Element, out: list[str]) -> None:
    for child in el:
        tag = child.tag
        if not isinstance(tag, str) or tag in _SKIP:
            continue
        if tag == W + "t":
            out.append(child.text or "")
        elif tag in (W + "tab", W + "ptab"):
            out.append("\t")
        elif tag in (W + "br", W + "cr"):
            out.append("\n")
        elif tag == W + "noBreakHyphen":
            out.append("-")
        elif tag == M + "oMath":
            out.append(f"${_math(child)}$")
        elif tag == W + "p":  # paragraphs nested in text boxes or cells
            inline_text(child, out)
            out.append("\n")
        else:
            inline_text(child, out)


def paragraph_text(p: etree._Element) -> str:
    out: list[str] = []
    inline_text(p, out)
    return "".join(out).strip()


def block_paragraphs(el: etree._Element) -> list[str]:
    """Plain text of every paragraph under `el` (comments, footnotes, table cells)."""
    texts: list[str] = []
    for p in el.iter(W + "p"):
        if p.getparent() is not None and any(a.tag == W + "p" for a in p.iterancestors()):
            continue
        t = paragraph_text(p)
        if t:
            texts.append(t)
    return texts
