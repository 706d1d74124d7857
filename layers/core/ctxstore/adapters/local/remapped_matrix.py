"""A mapped scope's matrix moved into a new mapped file when it outgrows its room or is compacted, not into memory.

A snapshot's file has spare rows (vector_snapshot.spare_rows: a tenth of the scope) that rows written after a
start fill in place. The first row past them copied the whole matrix into anonymous memory (1.5 GB at 1M rows):
a server that took a tenth more of a 1M scope without a restart ended past 2 GB of RSS (issue 28 goal 3), and
its int8 copy (quantized_rows.py) was dropped. Instead the rows go into a new file with room for more, beside
the snapshot, copied inside the kernel where it can (`copy_file_range`), and that file is mapped copy-on-write as
the snapshot was. It is unlinked once mapped, and one a crash left before that is removed at the next start. Its
first rows are the old file's, so the int8 copy still serves them. A compaction (a quarter of the rows deleted)
likewise writes the live rows into a new file, by pread in blocks, instead of a copy in memory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.mapped_rows import FileRows, gathered, mapped_file
from ctxstore.adapters.local.quantized_rows import QuantizedRows

log = logging.getLogger("ctxstore.search.vectors")

Vector = npt.NDArray[np.float32]
PREFIX = ".remapped-"  # files being written; unlinked once mapped
COPY_BLOCK_ROWS = 32_768  # rows read by pread at a time: 48 MB at 384 dimensions


def grown(mat: Vector, reader: FileRows, n: int, capacity: int) -> tuple[Vector, FileRows] | None:
    """`mat`'s first `n` rows (the first `reader.rows` of them in `reader`'s file) in a new copy-on-write mapping
    of `capacity` rows, and a reader of its file; None when no such file could be made (a full disk: the caller
    copies into memory as before)."""

    def fill(fd: int, at: int) -> None:
        copied = _copy_in_kernel(reader, fd, at)  # whole rows; the rest, and those added since the file, by blocks
        _write_blocks(fd, at + copied * reader.dim * 4, gathered(mat, reader, np.arange(copied, n), COPY_BLOCK_ROWS))

    out = _mapped(mat, n, capacity, fill)
    if out is not None and isinstance(reader.quantized, QuantizedRows):
        out[1].quantized = reader.quantized  # the same first rows: it answers for them, the rest are read whole
    return out


def compacted(mat: Vector, reader: FileRows, keep: npt.NDArray[np.intp]) -> tuple[Vector, FileRows] | None:
    """Rows `keep` (ascending) of `mat` in a new copy-on-write mapping, for a compaction: the file's rows read in
    blocks by pread (nothing mapped), those added since from memory. None as for `grown`."""

    def fill(fd: int, at: int) -> None:
        _write_blocks(fd, at, gathered(mat, reader, keep, COPY_BLOCK_ROWS))

    return _mapped(mat, len(keep), len(keep), fill)


def _mapped(mat: Vector, n: int, capacity: int, fill: Callable[[int, int], None]) -> tuple[Vector, FileRows] | None:
    """A new file beside `mat`'s of `capacity` rows, its first `n` written by `fill(fd, offset of row 0)`, mapped
    copy-on-write and unlinked; with a reader of those rows."""
    path = mapped_file(mat)
    if path is None:
        return None
    dim = mat.shape[1]
    try:
        fd, name = tempfile.mkstemp(prefix=PREFIX, suffix=".mat.npy", dir=Path(path).parent)
    except OSError as exc:
        log.warning("vector scope: no file to write beside its snapshot (%s); copying it into memory", exc)
        return None
    try:
        with os.fdopen(os.dup(fd), "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (capacity, dim)})
            start = fh.tell()
        fill(fd, start)
        os.ftruncate(fd, start + capacity * dim * 4)  # the room after the rows: sparse zeros
        new = np.asarray(np.memmap(name, dtype=np.float32, mode="c", offset=start, shape=(capacity, dim)))
    except OSError as exc:
        os.close(fd)
        log.warning("vector scope: could not write beside its snapshot (%s); copying it into memory", exc)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return new, FileRows(fd, start, n, dim)  # the reader owns fd


def _write_blocks(fd: int, at: int, blocks: Iterable[Vector]) -> None:
    """Consecutive blocks of rows into `fd` from offset `at`."""
    for block in blocks:
        data = np.ascontiguousarray(block, dtype=np.float32)
        if data.size and os.pwrite(fd, data.data, at) != data.nbytes:
            raise OSError("short write of a vector matrix")
        at += data.nbytes


def remove_leftovers(folder: Path) -> None:
    """At an index's start: files a crash left between their creation and their unlinking (one server a data dir)."""
    for stale in folder.glob(PREFIX + "*"):
        with contextlib.suppress(OSError):
            stale.unlink()


def _copy_in_kernel(reader: FileRows, fd: int, at: int) -> int:
    """Copies the reader's rows into `fd` at `at` with `copy_file_range` as far as it goes (not at all where it is
    missing or refuses these files); answers how many whole rows are in place."""
    size = reader.rows * reader.dim * 4
    done = 0
    if hasattr(os, "copy_file_range"):
        with contextlib.suppress(OSError):
            while done < size:
                step = os.copy_file_range(reader.fd, fd, size - done, reader.offset + done, at + done)
                if step <= 0:
                    break
                done += step
    return done // (reader.dim * 4)
