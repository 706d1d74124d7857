"""Files to ingest: reading them, and packing them into requests of bounded size."""

from __future__ import annotations

import mimetypes
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from ctxstore.client.models import Document

T = TypeVar("T")

MAX_FILE_BYTES = 50 * 1024 * 1024  # the API's per-file limit (413 for the whole request beyond it)
# One request carries at most this much: an AWS Lambda request is capped at 6 MB, and smaller
# requests give a progress bar something to show. A single larger file goes by reference (uploads).
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024
DEFAULT_BATCH_FILES = 16


def to_document(item: str | Path | Document) -> Document:
    """A Document from a path (read now) or the Document itself. The content type is guessed from the name,
    so a file without an extension still has one for the API's fallback rule."""
    if isinstance(item, Document):
        return item
    path = Path(item)
    guessed, _ = mimetypes.guess_type(path.name)
    return Document(filename=path.name, data=path.read_bytes(), content_type=guessed)


def walk(paths: Iterable[str | Path], *, recursive: bool = True) -> list[Path]:
    """Every file under `paths` (folders walked in name order; hidden files and folders skipped)."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            pattern = p.rglob("*") if recursive else p.glob("*")
            found.extend(
                f
                for f in sorted(pattern)
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
        else:
            found.append(p)
    return found


def batches(
    items: Iterable[T],
    size: Callable[[T], int],
    *,
    max_bytes: int = DEFAULT_BATCH_BYTES,
    max_files: int = DEFAULT_BATCH_FILES,
) -> Iterator[list[T]]:
    """Groups of items in order, each within `max_bytes` (by `size`) and `max_files` (a larger item goes alone)."""
    batch: list[T] = []
    total = 0
    for item in items:
        n = size(item)
        if batch and (total + n > max_bytes or len(batch) >= max_files):
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += n
    if batch:
        yield batch
