"""StarBasic macro source embedded in OpenDocument files (`Basic/<library>/<module>.xml`).

The source is text the document carries (as Apache Tika extracts it), so it is indexed under a
`## Macros` heading. It is only read, never run; the XML goes through the no-DTD, no-entity parser.
"""

from __future__ import annotations

import re

from .archive import open_zip, parse_xml, read_member
from .markdown import heading
from .model import ParseError

_MODULE = re.compile(r"^Basic/[^/]+/(?!script-l[bc]\.xml$|dialog-l[bc]\.xml$)[^/]+\.xml$")
_SCRIPT_NS = "{http://openoffice.org/2000/script}"
_MAX_MACRO_CHARS = 200_000


def basic_macros(data: bytes) -> str:
    """The macros section in markdown, or "" when the file has none."""
    zf = open_zip(data)
    parts: list[str] = []
    total = 0
    for name in sorted(n for n in zf.namelist() if _MODULE.match(n)):
        try:
            root = parse_xml(read_member(zf, name, _MAX_MACRO_CHARS))
        except ParseError:
            continue  # one unreadable module doesn't hide the document's text
        if root.tag != f"{_SCRIPT_NS}module":
            continue
        code = (root.text or "").strip()
        if not code or total > _MAX_MACRO_CHARS:
            continue
        total += len(code)
        module = root.get(f"{_SCRIPT_NS}name") or name.rsplit("/", 1)[-1].removesuffix(".xml")
        language = root.get(f"{_SCRIPT_NS}language") or "Basic"
        parts.append(f"{heading(3, f'{module} ({language})')}\n\n```basic\n{code}\n```")
    return f"{heading(2, 'Macros')}\n\n" + "\n\n".join(parts) if parts else ""
