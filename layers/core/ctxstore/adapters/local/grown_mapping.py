"""Room for more rows in a scope mapped from its snapshot, without copying its matrix into memory.

A snapshot's file has spare rows (vector_snapshot.spare_rows: a tenth of the scope) that rows written after a
start fill in place. The first row past them copied the whole matrix into anonymous memory (1.5 GB at 1M rows):
a server that took a tenth more of a 1M scope without a restart ended past 2 GB of RSS (issue 28 goal 3), and
its int8 copy (quantized_rows.py) was dropped. Instead the rows go into a new file with room for more, beside
the snapshot, copied inside the kernel where it can (`copy_file_range`), and that file is mapped copy-on-write as
the snapshot was. It is unlinked once mapped, and one a crash left before that is removed at the next start. Its
first rows are the old file's, so the int8 copy still serves them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.mapped_rows import FileRows, mapped_file
from ctxstore.adapters.local.quantized_rows import QuantizedRows

log = logging.getLogger("ctxstore.search.vectors")

Vector = npt.NDArray[np.float32]
PREFIX = ".grown-"
COPY_BLOCK_ROWS = 32_768  # without copy_file_range: 48 MB a read at 384 dimensions


def grown(mat: Vector, reader: FileRows, n: int, capacity: int) -> tuple[Vector, FileRows] | None:
    """`mat`'s first `n` rows (the first `reader.rows` of them in `reader`'s file) in a new copy-on-write mapping
    of `capacity` rows, and a reader of its file; None when no such file could be made (a full disk: the caller
    copies into memory as before)."""
    path = mapped_file(mat)
    if path is None:
        return None
    folder = Path(path).parent
    dim = mat.shape[1]
    row_bytes = dim * 4
    try:
        fd, name = tempfile.mkstemp(prefix=PREFIX, suffix=".mat.npy", dir=folder)
    except OSError as exc:
        log.warning("vector scope: no file to grow into beside its snapshot (%s); copying it into memory", exc)
        return None
    try:
        header = {"descr": "<f4", "fortran_order": False, "shape": (capacity, dim)}
        with os.fdopen(os.dup(fd), "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            start = fh.tell()
        _copy_rows(reader, fd, start)
        tail = np.ascontiguousarray(mat[reader.rows : n], dtype=np.float32)  # rows added since the file
        if tail.size and os.pwrite(fd, tail.data, start + reader.rows * row_bytes) != tail.nbytes:
            raise OSError("short write of a grown vector matrix")
        os.ftruncate(fd, start + capacity * row_bytes)  # the room after: sparse zeros
        new = np.asarray(np.memmap(name, dtype=np.float32, mode="c", offset=start, shape=(capacity, dim)))
    except OSError as exc:
        os.close(fd)
        log.warning("vector scope: could not grow beside its snapshot (%s); copying it into memory", exc)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    out = FileRows(fd, start, n, dim)  # owns fd from here
    if isinstance(reader.quantized, QuantizedRows):
        out.quantized = reader.quantized  # the same first rows: it answers for them, the rest are read whole
    return new, out


def remove_leftovers(folder: Path) -> None:
    """At an index's start: files a crash left between their creation and their unlinking (one server a data dir)."""
    for stale in folder.glob(PREFIX + "*"):
        with contextlib.suppress(OSError):
            stale.unlink()


def _copy_rows(reader: FileRows, fd: int, at: int) -> None:
    """The reader's rows into `fd` at offset `at`: inside the kernel where it can, else in blocks."""
    size = reader.rows * reader.dim * 4
    done = 0
    if hasattr(os, "copy_file_range"):
        try:
            while done < size:
                step = os.copy_file_range(reader.fd, fd, size - done, reader.offset + done, at + done)
                if step <= 0:
                    break
                done += step
        except OSError:  # not between these files (another filesystem on an old kernel): copy the rest by hand
            pass
    first = done // (reader.dim * 4)
    done = first * reader.dim * 4
    for row in range(first, reader.rows, COPY_BLOCK_ROWS):
        block = reader.block(row, min(COPY_BLOCK_ROWS, reader.rows - row))
        if os.pwrite(fd, block.data, at + row * reader.dim * 4) != block.nbytes:
            raise OSError("short write of a grown vector matrix")
