"""An HNSW index (usearch) over one large vector scope, keyed by the rows' SQLite rowids.

Chosen over faiss-cpu by bench/retrieval/ann_choice.py: it removes rows by key, saves and loads one file,
and builds faster for the same recall (numbers in that module's docstring). It only proposes candidates:
the lane rescores them exactly from its float32 matrix, so returned scores stay exact dot products.

The index is a cache; the SQLite rows are the truth. Rowids are never reused (AUTOINCREMENT) and a row's
vector never changes (an upsert writes a new row), so any index is brought up to date with a scope by the
difference of key sets: remove keys no longer alive, add the rows it lacks (`sync`). The file saved next
to search.db is loaded that way on start, whatever writes it missed; a missing or unreadable file, or one
of another dimension, is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

# onnxruntime (the local embedder) dies in its own import (SIGSEGV in std::codecvt) when usearch's extension,
# which carries its own libstdc++, was loaded first (usearch 2.26.6, onnxruntime 1.31.1); the other order
# works. Loaded here first, whichever module asks for either. Test: test_ann_lane.py, ..._in_one_process.
with contextlib.suppress(ImportError):
    import onnxruntime  # type: ignore[import-untyped]  # noqa: F401

from usearch.index import Index

Vector = npt.NDArray[np.float32]
RowIds = npt.NDArray[np.int64]

# i8 codes: 384 B per 384-d vector plus the graph (533 B a vector on disk, 640-790 in memory). The i8 distances
# misorder close rows, so the lane rescores the candidates from float32: 208 candidates (limit 100) at
# breadth 384 gave recall@100 0.990 on 100k rows grown from SciFact vectors (bench/retrieval/ann_choice.py),
# but only 0.964 on 107,556 real vectors, where 0.980 takes breadth 768 (bench/retrieval/ann_1m.py; f16
# reaches 0.986 at 512 for 1.8x the memory, i8 with connectivity 32 only 0.946).
DTYPE = "i8"
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 768
_BUILD_BLOCK = 65_536
TMP_SUFFIX = ".tmp"  # a save in progress; one a crash left behind is removed at the next start (ann_keeper.py)


def scope_file(directory: Path, key: tuple[str, ...]) -> Path:
    """The file of one scope: a hash of its key (org and database names may hold any character)."""
    digest = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:32]
    return directory / f"{digest}.usearch"


class AnnIndex:
    """usearch HNSW with a lock: usearch may reallocate while adding, which a concurrent search must not see."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._lock = threading.Lock()
        self.dirty = False  # changed since it was loaded or saved

    @classmethod
    def build(cls, dim: int, rowids: RowIds, rows_of: Callable[[slice], Vector], threads: int = 0) -> AnnIndex:
        """An index of `rowids`, whose vectors `rows_of` gives block by block (no copy of them all at once)."""
        index = Index(ndim=dim, metric="ip", dtype=DTYPE, connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD)
        index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # the stub omits the setter
        for start in range(0, len(rowids), _BUILD_BLOCK):
            block = slice(start, start + _BUILD_BLOCK)
            index.add(rowids[block], rows_of(block), threads=threads)
        ann = cls(index)
        ann.dirty = True
        return ann

    @classmethod
    def load(cls, path: Path, dim: int) -> AnnIndex | None:
        """The saved index, or None when there is none usable (missing, unreadable, another dimension)."""
        try:
            index = Index.restore(str(path))
        except (OSError, ValueError, RuntimeError):
            return None
        if index is None or index.ndim != dim:
            return None
        index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # the stub omits the setter
        return cls(index)

    def save(self, path: Path) -> None:
        """Write to a temporary file and rename it: a crash leaves the old file or the new one, never half.

        The temporary name is this save's own and the rename happens under the lock: two saves of one scope
        (a catch-up's and a clean stop's) once shared a name, and one renamed the file the other was writing."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{uuid.uuid4().hex}{TMP_SUFFIX}")
        try:
            with self._lock:
                self._index.save(str(tmp))
                os.replace(tmp, path)
                self.dirty = False
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> RowIds:
        with self._lock:
            return np.asarray(self._index.keys, dtype=np.int64)

    def add(self, rowids: RowIds, rows: Vector) -> None:
        if len(rowids):
            with self._lock:
                self._index.add(rowids, rows, threads=1)
                self.dirty = True

    def remove(self, rowids: RowIds) -> None:
        if len(rowids):
            with self._lock:
                self._index.remove(rowids)
                self.dirty = True

    def sync(self, alive: RowIds, rows_of: Callable[[RowIds], Vector]) -> tuple[int, int]:
        """Make the keys exactly `alive`; answers (removed, added)."""
        have = self.keys()
        stale = np.setdiff1d(have, alive, assume_unique=True)
        missing = np.setdiff1d(alive, have, assume_unique=True)
        self.remove(stale)
        self.add(missing, rows_of(missing))
        return len(stale), len(missing)

    def search(self, query: Vector, count: int, breadth: int | None = None) -> RowIds:
        """Rowids of about `count` nearest rows, best first (approximate: the caller rescores); `breadth`:
        expansion_search, EXPANSION_SEARCH unless given."""
        with self._lock:
            self._index.expansion_search = max(breadth or EXPANSION_SEARCH, count)  # type: ignore[misc]  # the stub omits the setter
            found = self._index.search(query, count, threads=1)
        return np.asarray(found.keys, dtype=np.int64)
