"""Back up a local data dir while `ctxstore serve` runs and ingests, and restore a backup into a new data dir.

What a backup holds: records.db (records, the queue, keys, settings) and search.db, each copied with SQLite's
online backup API (one read transaction: a consistent snapshot; writers go on, WAL never blocks them); the graph
engine's data (online: a BGSAVE of the running engine, then its RDB file; offline: its append-only files, copied
while this process holds the data dir's serve lock); blobs; the URL-signing key and the connector-credential vault's
key (so the backup is as secret as the data dir itself); format.json; manifest.json with each file's size and
SHA-256.

Order matters: records.db is copied first, then search.db, the graph and blobs. The pipeline writes an item's chunks,
relations and blobs before it records the item's status, so every item the copied records call indexed has them in
the later copies. Later copies may hold a little more (work done after the records' snapshot); the restored server
runs those items' queued jobs again, which rewrite the same chunks and relations.

The backup is written to a hidden sibling folder and renamed into place at the end: a backup killed midway leaves
no folder under the requested name (only a `.NAME.partial-PID` folder to delete) and never writes to the source.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxstore.adapters.local.data_dir_format import FORMAT_FILE, check_readable, product_version, read_format
from ctxstore.adapters.local.falkordb_engine import AOF_DIR, SOCKET_FILE

MANIFEST = "manifest.json"
DATABASES = ("records.db", "search.db")
KEY_FILES = ("url_signing.key", "connector_credentials.key")
# A restored graph starts from the backed-up RDB file as the base of a fresh multi-part append-only file (with
# `appendonly yes` the engine reads only the AOF; an RDB beside an absent AOF would be ignored).
_AOF_MANIFEST = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"


class BackupError(RuntimeError):
    """The backup or restore cannot proceed; the message says why and what to do."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _copy_sqlite(source: Path, target: Path) -> None:
    """SQLite's online backup: all pages in one step, inside one read transaction (a consistent snapshot)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=60)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


@contextlib.contextmanager
def _serve_lock(data_dir: Path) -> Iterator[bool]:
    """Hold the data dir's serve lock if no server holds it (True: offline, no server can start meanwhile)."""
    with (data_dir / "serve.lock").open("a") as fh:  # "a": created if absent, a server's pid in it kept
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _engine_client(graph: Path) -> Any:
    """A client of the graph engine running on `graph` (None: none answers there; its files are at rest)."""
    import redis

    try:
        socket_path = (graph / SOCKET_FILE).read_text().strip()
    except OSError:
        return None
    client = redis.Redis(unix_socket_path=socket_path, socket_timeout=30)
    try:
        client.ping()
    except redis.RedisError:
        client.close()
        return None
    return client


def _bgsave(client: Any, timeout_s: float) -> None:
    """A fresh RDB snapshot from the running engine, started after this call began (an automatic save already
    running is waited out: it may predate the records' snapshot)."""
    try:
        before = client.info("persistence")
        reply = client.execute_command("BGSAVE", "SCHEDULE")
        queued = b"scheduled" in reply if isinstance(reply, bytes) else "scheduled" in str(reply)
        target = int(before["rdb_saves"]) + (2 if queued and before["rdb_bgsave_in_progress"] else 1)
        deadline = time.monotonic() + timeout_s
        while True:
            info = client.info("persistence")
            if int(info["rdb_saves"]) >= target and not info["rdb_bgsave_in_progress"]:
                if info["rdb_last_bgsave_status"] != "ok":
                    raise BackupError("the graph engine's snapshot failed; see graph/redis.log in the data dir")
                return
            if time.monotonic() > deadline:
                raise BackupError(f"the graph engine's snapshot did not finish in {timeout_s:.0f} s")
            time.sleep(0.05)
    finally:
        client.close()


def _copy_graph(graph: Path, target: Path, *, offline: bool, timeout_s: float) -> None:
    if not graph.exists():
        return
    target.mkdir()
    client = None if offline else _engine_client(graph)
    if client is not None:
        _bgsave(client, timeout_s)
        shutil.copyfile(graph / "dump.rdb", target / "dump.rdb")  # replaced by rename only: one whole snapshot
        return
    # No engine runs on it: its files are at rest (offline, the serve lock keeps a server from starting).
    if (graph / AOF_DIR).is_dir():
        shutil.copytree(graph / AOF_DIR, target / AOF_DIR)
    if (graph / "dump.rdb").exists():
        shutil.copyfile(graph / "dump.rdb", target / "dump.rdb")


def _copy_blobs(blobs: Path, target: Path) -> None:
    """Every finished blob (not writers' temp files); one deleted while the walk runs is skipped."""
    for folder, _dirs, files in os.walk(blobs):
        for name in files:
            if name.startswith(".tmp-"):
                continue
            source = Path(folder) / name
            dest = target / source.relative_to(blobs)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(source, dest)


def _files(root: Path) -> dict[str, dict[str, Any]]:
    return {
        str(path.relative_to(root)): {"size": path.stat().st_size, "sha256": _sha256(path)}
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != MANIFEST
    }


def _fsync_tree(root: Path) -> None:
    for path in [*root.rglob("*"), root]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _staging(final: Path) -> Path:
    if final.exists():
        raise BackupError(f"{final} already exists; give a new path")
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.partial-{os.getpid()}"
    staging.mkdir(mode=0o700)
    return staging


def backup_data_dir(data_dir: Path, to: Path, *, graph_timeout_s: float = 600.0) -> dict[str, Any]:
    """Copy `data_dir` into the new folder `to` (see the module's docstring); returns the manifest."""
    if not (data_dir / "records.db").exists():
        raise BackupError(f"{data_dir} is not a ctxstore data dir (no records.db)")
    staging = _staging(to)
    try:
        with _serve_lock(data_dir) as offline:
            fmt = read_format(data_dir)
            for name in DATABASES:  # records first: see the module's docstring
                if (data_dir / name).exists():
                    _copy_sqlite(data_dir / name, staging / name)
            _copy_graph(data_dir / "graph", staging / "graph", offline=offline, timeout_s=graph_timeout_s)
            if (data_dir / "blobs").exists():
                _copy_blobs(data_dir / "blobs", staging / "blobs")
            for name in (*KEY_FILES, FORMAT_FILE):
                if (data_dir / name).exists():
                    shutil.copy2(data_dir / name, staging / name)
        manifest = {
            "ctxstore": product_version(),
            "format": fmt["format"],
            "written_by": fmt.get("written_by"),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "server_running": not offline,
            "files": _files(staging),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        _fsync_tree(staging)
        os.rename(staging, to)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _verified_manifest(backup: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((backup / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{backup} is not a ctxstore backup (no readable {MANIFEST}: {exc})") from None
    for name, want in manifest["files"].items():
        path = backup / name
        if not path.is_file() or path.stat().st_size != want["size"] or _sha256(path) != want["sha256"]:
            raise BackupError(f"{backup}: {name} is missing or damaged (size or SHA-256 differs from the manifest)")
    return manifest


def _restore_graph(backup: Path, target: Path) -> None:
    rdb = backup / "graph" / "dump.rdb"
    if not rdb.exists() or (target / AOF_DIR).exists():
        return
    aof = target / AOF_DIR
    aof.mkdir()
    shutil.copyfile(rdb, aof / "appendonly.aof.1.base.rdb")
    (aof / "appendonly.aof.1.incr.aof").write_bytes(b"")
    (aof / "appendonly.aof.manifest").write_text(_AOF_MANIFEST)


def restore_data_dir(backup: Path, data_dir: Path) -> dict[str, Any]:
    """Restore `backup` into `data_dir`, which must not exist or be empty; returns the backup's manifest.

    The files are checked against the manifest first and the data dir appears whole or not at all (staging folder,
    then rename). The first start on it runs the migrations a backup of an older format needs."""
    manifest = _verified_manifest(backup)
    check_readable({"format": manifest["format"], "written_by": manifest.get("written_by")}, f"backup {backup}")
    if data_dir.exists():
        if any(data_dir.iterdir()):
            raise BackupError(f"{data_dir} is not empty; restore into a new data dir")
        data_dir.rmdir()
    staging = _staging(data_dir)
    try:
        for name in manifest["files"]:
            dest = staging / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(backup / name, dest)
        if (staging / "graph").exists():
            _restore_graph(backup, staging / "graph")
        for name in KEY_FILES:
            if (staging / name).exists():
                os.chmod(staging / name, 0o600)
        _fsync_tree(staging)
        os.rename(staging, data_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest
