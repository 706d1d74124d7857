"""Shared helpers for the parsing tests: location of the shared parser corpus and text normalisation."""

from __future__ import annotations

import re
from pathlib import Path

# Repo is /work/main; the shared data set lives beside it in /work/shared/data. Never copied into the repo.
PARSER_DOCS = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "parser_docs"

_MARKUP = re.compile(r"[*_`#>|\\]+|\$")


def normalise(text: str) -> str:
    """Whitespace-collapsed text without markdown markup, for substring expectations."""
    return " ".join(_MARKUP.sub(" ", text).split())
