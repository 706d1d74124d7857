"""Reading rows of a matrix memory-mapped from a .npy file (a vector snapshot) without keeping them resident.

A page read through a file mapping stays in the process's resident set, and so do its neighbours: the kernel
maps up to 16 pages around each fault from the page cache (fault-around, with MADV_RANDOM too). At 1M rows of
384 floats, ~300 queries that rescore 208 random rows each bring most of the 1.5 GB matrix back into the RSS
(measured: 50 such queries map all of a 150 MB matrix). `pread` copies the rows out of the page cache instead
and leaves nothing mapped: ~2-3 us a row, so it serves the HNSW index's few hundred candidates, while large
gathers and scans keep the mapping.
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]

PREAD_MAX_ROWS = 4_096  # larger gathers read through the mapping (a Python step per row costs more there)


def _mapping(mat: Vector) -> np.memmap | None:
    base: object = mat
    while base is not None and not isinstance(base, np.memmap):
        base = getattr(base, "base", None)
    return base if isinstance(base, np.memmap) else None


def mapped_file(mat: Vector) -> str | None:
    """The path of the file `mat` maps (it may have been unlinked since), or None."""
    mapped = _mapping(mat)
    return None if mapped is None or mapped.filename is None else str(mapped.filename)


def release_pages(mat: Vector, rows: int) -> bool:
    """Drop the pages of a mapped matrix's first `rows` rows (those read from its file) from this process's
    resident set; they stay in the page cache and come back on the next read. Answers whether it was mapped.

    Only whole pages before row `rows` go: a snapshot is mapped copy-on-write and rows added after the start
    fill its spare rows in private pages, which MADV_DONTNEED would discard (vector_snapshot.py); rows below
    `rows` are never written in place (vector_cache.py)."""
    mapped = _mapping(mat)
    if mapped is None or not isinstance(mapped.base, mmap.mmap):
        return False
    # np.memmap maps from the allocation granule holding its offset; the data starts that far into the map.
    start = int(mapped.offset) % mmap.ALLOCATIONGRANULARITY + (mat.ctypes.data - mapped.ctypes.data)
    end = start + rows * mat.shape[1] * mat.itemsize
    length = end - end % mmap.PAGESIZE
    if length > 0:
        mapped.base.madvise(mmap.MADV_DONTNEED, 0, length)
    return True


class FileRows:
    """Rows of one mapped matrix, read by pread from the file it maps (opened while that file exists)."""

    def __init__(self, fd: int, offset: int, rows: int, dim: int) -> None:
        self._fd = fd
        self._offset = offset
        self.rows = rows
        self._row_bytes = dim * 4
        self._dim = dim
        # The int8 copy of the rows (quantized_rows.py): "building", "failed" or the copy; and whether the pages
        # mapped before it was ready have been released.
        self.quantized: object = None
        self.released = False
        weakref.finalize(self, os.close, fd)  # views hold it: closed when the last one goes

    @classmethod
    def of(cls, mat: Vector, rows: int) -> FileRows | None:
        """A reader of the first `rows` rows of `mat` (those its file holds: a copy-on-write mapping's later rows
        live in memory only) when it is a C-ordered float32 mapping of a file, else None."""
        mapped = _mapping(mat)
        if mapped is None or mapped.filename is None or mat.dtype != np.float32 or not mat.flags.c_contiguous:
            return None
        start = mat.ctypes.data - mapped.ctypes.data  # mat may start inside the mapping
        try:
            fd = os.open(mapped.filename, os.O_RDONLY)
        except OSError:  # replaced since it was mapped: the mapping still serves
            return None
        return cls(fd, int(mapped.offset) + start, rows, mat.shape[1])

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def offset(self) -> int:
        """Where row 0 starts in the file."""
        return self._offset

    def take(self, at: npt.NDArray[np.int64]) -> Vector:
        """Rows `at`, all below `rows`."""
        out = np.empty((len(at), self._dim), dtype=np.float32)
        buf = out.data.cast("B")
        size = self._row_bytes
        for j, i in enumerate(at.tolist()):
            if os.preadv(self._fd, [buf[j * size : (j + 1) * size]], self._offset + i * size) != size:
                raise OSError(f"short read of row {i} from a vector snapshot")
        return out

    def block(self, start: int, count: int) -> Vector:
        """Rows [start, start + count) in one read (a copy: nothing mapped)."""
        out = np.empty((count, self._dim), dtype=np.float32)
        size = count * self._row_bytes
        if os.preadv(self._fd, [out.data.cast("B")], self._offset + start * self._row_bytes) != size:
            raise OSError(f"short read of rows {start}-{start + count} from a vector snapshot")
        return out


def gathered(mat: Vector, reader: FileRows | None, keep: npt.NDArray[np.intp], block_rows: int) -> Iterator[Vector]:
    """Rows `keep` (ascending positions) of `mat`, in order and in blocks of at most `block_rows`: those in the
    reader's file by pread of whole windows of the file (nothing mapped: a save or a compaction through the mapping
    left the whole matrix resident), the others (added since the file, or all without a reader) from `mat`."""
    done = 0
    if reader is not None:
        for first in range(0, reader.rows, block_rows):
            last = min(first + block_rows, reader.rows)
            lo, hi = (int(x) for x in np.searchsorted(keep, [first, last]))
            if hi > lo:
                yield reader.block(first, last - first)[keep[lo:hi] - first]
        done = int(np.searchsorted(keep, reader.rows))
    for start in range(done, len(keep), block_rows):
        yield np.ascontiguousarray(mat[keep[start : start + block_rows]])
