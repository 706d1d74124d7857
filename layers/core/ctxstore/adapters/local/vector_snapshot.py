"""A scope's in-memory vectors, saved beside search.db and read back at the next start.

Reading a scope from SQLite costs a query and a copy per block: 2 s for 100k chunks alone, 6 s while the rest
of `serve` starts beside it (bench/ops/restart.py), ~25 s at 1M. A snapshot holds the live rows as array files;
the matrix is memory-mapped when read back, so a start pays neither the read nor the copy. Snapshots are saved
at a clean close and, while `serve` runs, whenever a large scope has changed enough since its last one
(SqliteSearchIndex.save_due_snapshots), so a start after `kill -9` finds a recent one. SQLite stays the truth:
a snapshot taken at the scope's current generation (every write bumps it in the same transaction as the rows)
is used as it is; an older one is caught up from SQLite (vector_loading.py). Files are written whole and renamed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.mapped_rows import FileRows, gathered
from ctxstore.adapters.local.vector_cache import VectorScope

log = logging.getLogger("ctxstore.search.vectors")

ScopeKey = tuple[str, str, str]
FORMAT = 2


def folder_for(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".vectors")


def _stem(key: ScopeKey) -> str:
    return hashlib.sha256("\0".join(key).encode()).hexdigest()[:40]


def _publish(tmp: Path, path: Path) -> None:
    """A file written whole at `tmp`: on disk, then renamed into place."""
    with tmp.open("rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        write(fh)
    _publish(tmp, path)


@dataclass(frozen=True)
class Capture:
    """What a save writes, taken under the cache's lock in microseconds and written outside it: the matrix and
    codes are referenced, not copied (rows below `n` are never written in place, vector_cache.py), and the
    live rows are fixed now."""

    generation: int
    dim: int
    mat: npt.NDArray[np.float32]
    ids: npt.NDArray[np.int64]
    coll: npt.NDArray[np.int32]
    live: npt.NDArray[np.intp]
    names: list[str]
    codes: dict[str, npt.NDArray[Any]]
    file_rows: FileRows | None = None  # reads `mat`'s first rows from the file it maps, without mapping them


def capture(scope: VectorScope) -> Capture:
    # Rows appended since the last large search have no codes yet; without them the snapshot kept none, and the
    # next start encoded every row again (1M: a pass over the whole 1.5 GB matrix before its first answer).
    scope.extend_codes()
    live = np.flatnonzero(scope.alive[: scope.n])
    names = sorted(scope.coll_codes, key=lambda name: scope.coll_codes[name])
    codes: dict[str, npt.NDArray[Any]] = {}
    if scope.codes is not None and scope.center is not None and scope.coded >= scope.n:
        codes = {"codes": scope.codes, "center": scope.center, "centered_at": np.array(scope.centered_at)}
    return Capture(scope.generation, scope.dim, scope.mat, scope.ids, scope.coll, live, names, codes, scope.file_rows)


def save(folder: Path, key: ScopeKey, scope: VectorScope) -> None:
    write(folder, key, capture(scope))


def write(folder: Path, key: ScopeKey, cap: Capture) -> None:
    """The matrix as a plain .npy (memory-mapped when read back) named by a fresh token, then the small arrays
    and the token in `<scope>.npz`, renamed last: a reader finds either the old pair or the new one."""
    live = cap.live
    folder.mkdir(parents=True, exist_ok=True)
    stem, token = _stem(key), secrets.token_hex(8)
    _write_matrix(folder / f"{stem}-{token}.mat.npy", cap.mat, live, cap.file_rows)
    arrays: dict[str, Any] = {
        "header": np.array([FORMAT, cap.generation, cap.dim], dtype=np.int64),
        "key": np.array(list(key), dtype=str),
        "token": np.array(token),
        "ids": cap.ids[live],
        "coll": cap.coll[live],
        "names": np.array(cap.names, dtype=str),
    }
    if cap.codes:  # the shortlist's 1-bit codes (a pass over every row, seconds at 1M), when they cover every row
        arrays |= {
            "codes": np.ascontiguousarray(cap.codes["codes"][:, live]),
            "center": cap.codes["center"],
            "centered_at": np.asarray(cap.codes["centered_at"], dtype=np.int64),
        }
    _write(folder / f"{stem}.npz", lambda fh: np.savez(fh, **arrays))
    for old in folder.glob(f"{stem}-*.mat.npy"):  # a running reader keeps its mapping of a removed file
        if old.name != f"{stem}-{token}.mat.npy":
            with contextlib.suppress(OSError):
                old.unlink()


def spare_rows(rows: int) -> int:
    """Zero rows after the live ones: appends after a start fill them in place (copy-on-write pages) instead of
    copying the whole matrix into memory (1.5 GB at 1M, seconds of the first query after a crash). Not written to
    disk: the file is sparse there."""
    return max(1024, rows // 10)


def _write_matrix(
    path: Path, mat: npt.NDArray[np.float32], live: npt.NDArray[np.intp], reader: FileRows | None = None
) -> None:
    """Written through the file, not a writable memory map: the map's dirty pages counted in the server's
    resident memory until the end, the whole matrix more (1.5 GB at 1M: a first start peaked at 3.7 GB). The rows
    a mapped matrix holds in its file are read by pread: through the mapping, a periodic save left them resident."""
    rows, dim = len(live), mat.shape[1]
    shape = (rows + spare_rows(rows), dim)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False, "shape": shape}

    def write(fh: IO[bytes]) -> None:
        np.lib.format.write_array_header_1_0(fh, header)
        for block in gathered(mat, reader, live, 8_192):  # 12 MB at a time (384 dims): no second copy of the matrix
            fh.write(np.ascontiguousarray(block, dtype=np.float32).data)
        fh.truncate(fh.tell() + (shape[0] - rows) * dim * 4)  # the spare rows: zeros, sparse on disk

    _write(path, write)


def load(folder: Path, key: ScopeKey, generation: int | None = None) -> VectorScope | None:
    """The scope as saved (only at `generation` when one is given), or None (no snapshot, unreadable).

    The matrix stays memory-mapped copy-on-write: rows are never written in place below `n` (vector_cache.py),
    rows added go into its spare rows (only their pages become private memory), and the first row past them
    copies it into a matrix with room to grow."""
    path = folder / f"{_stem(key)}.npz"
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as snap:
            fmt, gen, dim = (int(x) for x in snap["header"])
            if fmt != FORMAT or (generation is not None and gen != generation) or tuple(snap["key"].tolist()) != key:
                return None
            token = str(snap["token"])
            ids = np.ascontiguousarray(snap["ids"], dtype=np.int64)
            coll = np.ascontiguousarray(snap["coll"], dtype=np.int32)
            names = [str(n) for n in snap["names"]]
            coded = "codes" in snap.files
            codes = np.ascontiguousarray(snap["codes"], dtype=np.uint64) if coded else None
            center = np.ascontiguousarray(snap["center"], dtype=np.float32) if coded else None
            centered_at = int(snap["centered_at"]) if coded else 0
        mat = np.asarray(np.load(folder / f"{_stem(key)}-{token}.mat.npy", mmap_mode="c"))
        if mat.ndim != 2 or mat.shape[0] < len(ids) or mat.shape[1] != dim or mat.dtype != np.float32:
            raise ValueError(f"matrix {mat.shape} {mat.dtype} does not match {len(ids)} rows of {dim}")
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        log.warning("vector snapshot of %s/%s unreadable (%s); reading the scope from search.db", key[1], key[2], exc)
        return None
    count, room = len(ids), mat.shape[0]
    alive = np.zeros(room, dtype=np.bool_)
    alive[:count] = True
    return VectorScope(
        generation=gen,
        dim=dim,
        mat=mat,
        ids=np.concatenate([ids, np.zeros(room - count, dtype=np.int64)]),
        coll=np.concatenate([coll, np.zeros(room - count, dtype=np.int32)]),
        alive=alive,
        n=count,
        coll_codes={name: code for code, name in enumerate(names)},
        codes=codes,
        coded=count if codes is not None else 0,
        center=center,
        centered_at=centered_at,
    )


def is_saved(folder: Path, key: ScopeKey, scope: VectorScope) -> bool:
    """Whether the snapshot on disk already holds this scope as it is (a stop then rewrites nothing: 1.5 GB at 1M)."""
    path = folder / f"{_stem(key)}.npz"
    try:
        with np.load(path, allow_pickle=False) as snap:
            fmt, gen, _ = (int(x) for x in snap["header"])
            has_codes = "codes" in snap.files
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return False
    return fmt == FORMAT and gen == scope.generation and (has_codes or not capture(scope).codes)


def discard(folder: Path, key: ScopeKey) -> None:
    for path in (*folder.glob(f"{_stem(key)}-*.mat.npy"), folder / f"{_stem(key)}.npz"):
        with contextlib.suppress(OSError):
            path.unlink()
