"""Which stored item a local file is, so that ingesting the same folder again updates it in place.

A file's id is derived from where it sits, not drawn at random: `file-` and the first 32 hex digits of
SHA-256 over `database`, `collection` and the file's key, joined by newlines. The key is the file's path
inside the folder that was named on the command line, with that folder's own name in front
(`ctxstore ingest ./handbook` stores `handbook/leave/policy.md`), or the file's name for a file named
directly. So the id does not depend on the current directory or on how the folder was spelled, and the
same file in two collections is two items.

The file's SHA-256 rides along in `additional_metadata` (HASH_FIELD); before sending, the command asks the
server for the stored copies (`POST /context/list` with their ids) and skips a file whose stored hash is
the same (unchanged), unless its stored copy failed indexing.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ctxstore.commands.common import Refused

if TYPE_CHECKING:
    from ctxstore.client import CtxstoreClient

HASH_FIELD = "ctxstore_sha256"  # additional_metadata key: the content hash of the file stored under this id
ID_PREFIX = "file-"
IDS_PER_LOOKUP = 500  # POST /context/list answers at most 500 rows a page

Change = Literal["new", "updated", "unchanged"]


@dataclass(frozen=True)
class LocalFile:
    path: Path
    key: str  # "handbook/leave/policy.md"
    id: str
    sha256: str
    size: int


@dataclass(frozen=True)
class StoredCopy:
    sha256: str | None  # None: stored without a hash (by another client, or before this rule)
    status: str | None  # its indexing status


def file_key(path: Path, roots: Sequence[Path]) -> str:
    for root in roots:
        if root.is_dir() and path.is_relative_to(root):
            inside = path.relative_to(root).as_posix()
            folder = root.resolve().name
            return f"{folder}/{inside}" if folder else inside
    return path.name


def file_id(database: str, collection: str, key: str) -> str:
    """The item id of the file at `key` in this database and collection (no comma, 37 characters)."""
    digest = hashlib.sha256("\n".join((database, collection, key)).encode("utf-8")).hexdigest()
    return ID_PREFIX + digest[:32]


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def unique(files: Sequence[Path]) -> list[Path]:
    """Each file once, even when named directly and through its folder, or through nested folders."""
    seen: set[Path] = set()
    out: list[Path] = []
    for f in files:
        real = f.resolve()
        if real not in seen:
            seen.add(real)
            out.append(f)
    return out


def identify(files: Sequence[Path], roots: Sequence[Path], database: str, collection: str) -> list[LocalFile]:
    """The id and content hash of every file. Two different files with one key (`a/docs` and `b/docs` in one
    command) would overwrite each other: refused before anything is sent."""
    keyed = [(f, file_key(f, roots)) for f in files]
    by_key: dict[str, list[Path]] = defaultdict(list)
    for f, key in keyed:
        by_key[key].append(f)
    clashes = {key: paths for key, paths in by_key.items() if len(paths) > 1}
    if clashes:
        key, paths = next(iter(clashes.items()))
        raise Refused(
            f"{len(clashes)} file name(s) would be stored under the same id, e.g. '{key}' from "
            + " and ".join(str(p) for p in paths),
            hint="ingest those folders in separate commands into different collections (-c), or rename one",
        )
    from ctxstore.client.documents import MAX_FILE_BYTES

    out = []
    for f, key in keyed:
        size = f.stat().st_size
        digest = _sha256(f) if size <= MAX_FILE_BYTES else ""  # too large to send: not worth reading
        out.append(LocalFile(f, key, file_id(database, collection, key), digest, size))
    return out


def stored_copies(client: CtxstoreClient, ids: Sequence[str]) -> dict[str, StoredCopy]:
    """What the server holds under these ids (knowledge), in one list call per 500 ids."""
    found: dict[str, StoredCopy] = {}
    for start in range(0, len(ids), IDS_PER_LOOKUP):
        part = list(ids[start : start + IDS_PER_LOOKUP])
        page = client.list_sources(type="knowledge", ids=part, page_size=IDS_PER_LOOKUP)
        for row in page.sources:
            extra = row.raw().get("additional_metadata") or {}
            stored_hash = extra.get(HASH_FIELD) if isinstance(extra, dict) else None
            found[row.id] = StoredCopy(str(stored_hash) if stored_hash else None, row.indexing_status)
    return found


def change_of(local: LocalFile, stored: StoredCopy | None) -> Change:
    if stored is None:
        return "new"
    if stored.sha256 == local.sha256 and stored.status != "errored":
        return "unchanged"
    return "updated"  # new content, or the same content whose indexing failed: sent again
