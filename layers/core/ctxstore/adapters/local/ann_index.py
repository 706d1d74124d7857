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

# i8 codes of our own: usearch's own cast normalises a vector and maps [-1, 1] onto [-127, 127], so a unit
# 384-d vector (components ~0.05, at most ~0.3 in real embeddings) used about +-6 of the range, and those coarse
# distances misled the graph: 0.981 recall@100 at 1M took breadth 768 (connectivity 16, 3.8 ms) and a denser
# graph did worse (0.946 at connectivity 32 on 107k). Scaling by I8_SCALE (0.3 -> 127, clipped beyond) and
# passing int8 keeps usearch's inner product on the codes an inner product of the vectors, ~3x finer. At 1M
# rows grown from real vectors (bench/retrieval/ann_1m.py, config q8-32-256, 208 candidates rescored): first
# pass 0.982 at breadth 256 (2.1 ms), 0.990 at 384 (2.6 ms); the feedback search's moved vector 0.987 at 208
# (1.7 ms). The lane rescores candidates from float32, so clipping an outlying component costs only a rank.
# Memory: 384 B of codes a vector plus the graph (660 B a vector on disk, ~1,065 in memory at connectivity 32).
# Building takes ~1.2 ms a vector on 2 threads at 1M (2.5 ms on the one thread a server gives it).
DTYPE = "i8"
I8_SCALE = 127.0 / 0.3
CONNECTIVITY = 32
EXPANSION_ADD = 256
EXPANSION_SEARCH = 320  # first passes: ~0.986 at 1M
# Rows added after the build (ann_feeder.py feeds them in the background): on 107k real vectors, 20k built at 256
# and the rest added at 128 answer 0.994 at breadth 320 (all at 256: 0.995) for 0.75 ms an add instead of 1.2;
# at 64, 0.983 for 0.28 ms.
EXPANSION_ADD_LATER = 128
# In the file name: a file of another format (usearch's codes, another graph) is removed at start and rebuilt.
FORMAT = "q8c32"
_BUILD_BLOCK = 65_536
SUFFIX = ".usearch"
TMP_SUFFIX = ".tmp"  # a save in progress; one a crash left behind is removed at the next start (ann_keeper.py)


def scope_file(directory: Path, key: tuple[str, ...]) -> Path:
    """The file of one scope: a hash of its key (org and database names may hold any character)."""
    digest = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:32]
    return directory / f"{digest}.{FORMAT}{SUFFIX}"


def stale_files(directory: Path) -> list[Path]:
    """Files a crash left half written, and indexes of another format (read by no query: rebuilt)."""
    if not directory.is_dir():
        return []
    current = f".{FORMAT}{SUFFIX}"
    older = [p for p in directory.glob(f"*{SUFFIX}") if not p.name.endswith(current)]
    return [*directory.glob(f"*{TMP_SUFFIX}"), *older]


def codes(rows: Vector) -> npt.NDArray[np.int8]:
    """The int8 codes usearch stores and compares (see I8_SCALE)."""
    coded: npt.NDArray[np.int8] = np.clip(np.rint(rows * I8_SCALE), -127, 127).astype(np.int8)
    return coded


class AnnIndex:
    """usearch HNSW with a lock: usearch may reallocate while adding, which a concurrent search must not see."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._lock = threading.Lock()
        self.changes = 0  # rows added or removed since it was loaded or saved

    @classmethod
    def build(cls, dim: int, rowids: RowIds, rows_of: Callable[[slice], Vector], threads: int = 0) -> AnnIndex:
        """An index of `rowids`, whose vectors `rows_of` gives block by block (no copy of them all at once)."""
        index = Index(ndim=dim, metric="ip", dtype=DTYPE, connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD)
        index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # the stub omits the setter
        for start in range(0, len(rowids), _BUILD_BLOCK):
            block = slice(start, start + _BUILD_BLOCK)
            index.add(rowids[block], codes(rows_of(block)), threads=threads)
        index.expansion_add = EXPANSION_ADD_LATER  # type: ignore[misc]  # the stub omits the setter
        ann = cls(index)
        ann.changes = len(rowids)
        return ann

    @classmethod
    def load(cls, path: Path, dim: int) -> AnnIndex | None:
        """The saved index, or None when there is none usable (missing, unreadable, another dimension)."""
        try:
            index = Index.restore(str(path))
        except (OSError, ValueError, RuntimeError):
            return None
        if index is None or index.ndim != dim or index.connectivity != CONNECTIVITY:
            return None
        index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # the stub omits the setter
        index.expansion_add = EXPANSION_ADD_LATER  # type: ignore[misc]
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
                self.changes = 0
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    @property
    def dirty(self) -> bool:
        return self.changes > 0

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> RowIds:
        with self._lock:
            return np.asarray(self._index.keys, dtype=np.int64)

    def last_key(self) -> int:
        """The largest rowid held (0 when empty): rows are fed in rowid order, so every row up to it is in."""
        keys = self.keys()
        return int(keys.max()) if keys.size else 0

    def add(self, rowids: RowIds, rows: Vector) -> None:
        if len(rowids):
            with self._lock:
                self._index.add(rowids, codes(rows), threads=1)
                self.changes += len(rowids)

    def remove(self, rowids: RowIds) -> None:
        if len(rowids):
            with self._lock:
                self._index.remove(rowids)
                self.changes += len(rowids)

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
        expansion_search, EXPANSION_SEARCH unless given (a filtered search widens it: ann_candidates.py)."""
        with self._lock:
            self._index.expansion_search = max(breadth or EXPANSION_SEARCH, count)  # type: ignore[misc]  # the stub omits the setter
            found = self._index.search(codes(query), count, threads=1)
        return np.asarray(found.keys, dtype=np.int64)
