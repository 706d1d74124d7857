"""An int8 copy of a vector snapshot file's rows: large shortlists are narrowed on it, not read through the mapping.

A query into 100 collections of a 1M-row scope rescored its shortlist (5 % of 100k allowed rows: 5,000) from the
snapshot's mapping, past what `pread` serves quickly (mapped_rows.PREAD_MAX_ROWS). Each fault there maps a large
folio of the page cache into the resident set: ~100 MB a query, the whole 1.7 GB matrix after ~20 queries (RSS
2.1 GB at the end of `small_scopes measure`, issue 28 goal 3). Now such a shortlist is scored first on int8 rows
held in memory (a row's 384 dimensions in 384 B, each scaled by its dimension's largest magnitude), and only its
best `keep` rows are read by `pread` and scored exactly: the scores returned stay exact dot products.

The copy is built once per snapshot file, on its first large shortlist, by a background thread reading the file
in blocks (two passes: the scales, then the codes; 2.4 s at 1.01M rows). Until it is ready, such shortlists
read their rows by pread (~17 ms for 5,000): through the mapping, the ~20 queries of a build mapped 1.5 GB and
took the peak to 2.6 GB. If it cannot be built, the mapping serves as before.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.mapped_rows import FileRows, release_pages

log = logging.getLogger("ctxstore.search.vectors")

Vector = npt.NDArray[np.float32]
BLOCK_ROWS = 32_768  # 48 MB of float32 rows a read at 384 dimensions
KEEP_MIN = 256  # rows read exactly at least (k is 28 for a `fast` query's 10 results)
KEEP_PER_K = 2  # and twice the rows the search asks for
# Smaller files stay mapped: at most 300 MB resident, and a 100k scope's search (5,000 rows rescored) kept its
# time (the copy's path took ~1 ms more a search there: int8 scores and a pread of the best rows).
MIN_ROWS = 200_000
BUILDING, FAILED = "building", "failed"  # FileRows.quantized while there is no copy


@dataclass(frozen=True)
class QuantizedRows:
    codes: npt.NDArray[np.int8]  # (rows, dim)
    scale: Vector  # (dim,): a dimension's value is code * scale

    @property
    def rows(self) -> int:
        return int(self.codes.shape[0])

    @classmethod
    def build(cls, reader: FileRows, block_rows: int = BLOCK_ROWS) -> QuantizedRows:
        dim = reader.dim
        peak = np.zeros(dim, dtype=np.float32)
        for start in range(0, reader.rows, block_rows):
            block = reader.block(start, min(block_rows, reader.rows - start))
            np.maximum(peak, np.abs(block).max(axis=0), out=peak)
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        codes = np.empty((reader.rows, dim), dtype=np.int8)
        for start in range(0, reader.rows, block_rows):
            block = reader.block(start, min(block_rows, reader.rows - start))
            codes[start : start + len(block)] = np.rint(block / scale)
        return cls(codes, scale)

    def scores(self, at: npt.NDArray[np.int64], query: Vector) -> Vector:
        """Approximate dot products of rows `at` with `query` (einsum: single-threaded, see vector_cache._scores)."""
        approx: Vector = np.einsum("ij,j->i", self.codes[at], query * self.scale, dtype=np.float32)
        return approx


class _Copies:
    """The int8 copy of each reader's file, built in the background when first asked for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def ready(self, reader: FileRows, mat: Vector) -> QuantizedRows | None:
        """The copy when built (the file's pages mapped before are released the first time); else None, and the
        build is started if it was not."""
        with self._lock:
            state = reader.quantized
            if state is None:
                reader.quantized = BUILDING
                threading.Thread(target=self._build, args=(reader,), name="vector-int8", daemon=True).start()
                return None
            if not isinstance(state, QuantizedRows):
                return None  # building, or failed (the mapping serves)
            if not reader.released:
                reader.released = True
                release_pages(mat, reader.rows)
            return state

    def _build(self, reader: FileRows) -> None:
        try:
            copy = QuantizedRows.build(reader)
        except Exception:  # a snapshot removed under it, or memory: the mapping keeps serving
            log.exception("vector snapshot: the int8 copy could not be built")
            with self._lock:
                reader.quantized = FAILED
            return
        with self._lock:
            reader.quantized = copy


COPIES = _Copies()


def narrowed(
    reader: FileRows, mat: Vector, query: Vector, rows: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.int64]:
    """`rows` (positions) with those of the file cut to the best `keep` by the int8 copy, when it is ready; rows
    added since the file was written are kept whole (they live in memory). Files under `MIN_ROWS` are left to
    the mapping."""
    if reader.rows < MIN_ROWS:
        return rows
    copy = COPIES.ready(reader, mat)
    keep = max(KEEP_MIN, KEEP_PER_K * k)
    if copy is None:
        return rows
    in_file = rows < copy.rows
    filed = rows[in_file]
    if filed.size <= keep:
        return rows
    approx = copy.scores(filed, query)
    best = filed[np.argpartition(-approx, keep - 1)[:keep]]
    return np.concatenate([best, rows[~in_file]])
