"""A scope's in-memory vectors, saved beside search.db at a clean close and read back at the next start.

Reading a scope from SQLite costs a query and a copy per block: 2 s for 100k chunks alone, 6 s while the rest of
`serve` starts beside it (bench/ops/restart.py), ~15 s at 1M. A snapshot holds the live rows as one array file and
loads in a fraction of that. SQLite stays the truth: a snapshot is used only when it was taken at the scope's
current generation (every write bumps it in the same transaction as the rows), so after a crash, a write made
since, or a restored data dir the scope is read from SQLite as before. Files are written whole and renamed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import zipfile
from pathlib import Path

import numpy as np

from ctxstore.adapters.local.vector_cache import VectorScope

log = logging.getLogger("ctxstore.search.vectors")

ScopeKey = tuple[str, str, str]
FORMAT = 1


def folder_for(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".vectors")


def _path(folder: Path, key: ScopeKey) -> Path:
    return folder / (hashlib.sha256("\0".join(key).encode()).hexdigest()[:40] + ".npz")


def save(folder: Path, key: ScopeKey, scope: VectorScope) -> None:
    live = np.flatnonzero(scope.alive[: scope.n])
    names = sorted(scope.coll_codes, key=lambda name: scope.coll_codes[name])
    folder.mkdir(parents=True, exist_ok=True)
    path = _path(folder, key)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        np.savez(
            fh,
            header=np.array([FORMAT, scope.generation, scope.dim], dtype=np.int64),
            key=np.array(list(key), dtype=str),
            mat=scope.mat[live],
            ids=scope.ids[live],
            coll=scope.coll[live],
            names=np.array(names, dtype=str),
        )
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load(folder: Path, key: ScopeKey, generation: int) -> VectorScope | None:
    """The scope as saved at `generation`, or None (no snapshot, another generation, unreadable)."""
    path = _path(folder, key)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as snap:
            fmt, gen, dim = (int(x) for x in snap["header"])
            if fmt != FORMAT or gen != generation or tuple(snap["key"].tolist()) != key:
                return None
            ids, coll, names = snap["ids"], snap["coll"], [str(n) for n in snap["names"]]
            mat = snap["mat"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        log.warning("vector snapshot %s unreadable (%s); reading the scope from search.db", path.name, exc)
        return None
    count = len(ids)
    scope = VectorScope.empty(gen, dim, capacity=max(1024, count + count // 4))
    if count:
        scope.add_block(ids, [names[c] for c in coll.tolist()], mat)
    return scope


def discard(folder: Path, key: ScopeKey) -> None:
    with contextlib.suppress(OSError):
        _path(folder, key).unlink()
