"""`ctxstore backup` and `ctxstore restore`: a consistent copy of a local data dir, taken while `serve` runs or not,
and its restore into a new data dir (docs/operations.md, "Back up and restore"). `serve --backup-dir DIR` also
takes one when the server receives SIGUSR1 (for operators who script the running process rather than a CLI)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from ctxstore.cli.serve import DataDirOpt, server_settings


def backup_on_signal(data_dir: Path, backup_dir: Path) -> None:
    """SIGUSR1 -> a backup of `data_dir` into `backup_dir`/ctxstore-<UTC time>, in a thread (one at a time)."""
    log = logging.getLogger("ctxstore.backup")
    busy = threading.Lock()

    def run() -> None:
        from ctxstore.runtime.data_dir_ops import backup_data_dir

        target = backup_dir / f"ctxstore-{datetime.now(UTC):%Y%m%dT%H%M%S.%fZ}"
        try:
            manifest = backup_data_dir(data_dir, target)
            log.info("backup written to %s (%d files)", target, len(manifest["files"]))
        except Exception:
            log.exception("backup to %s failed", target)
        finally:
            busy.release()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not busy.acquire(blocking=False):
            log.warning("a backup is already running: SIGUSR1 ignored")
            return
        threading.Thread(target=run, name="backup", daemon=True).start()

    signal.signal(signal.SIGUSR1, on_signal)


def register(app: typer.Typer) -> None:
    @app.command()
    def backup(
        to: Annotated[str, typer.Option("--to", help="New folder to write the backup to (must not exist).")],
        data_dir: DataDirOpt = None,
    ) -> None:
        """Back up a data dir (records, queue, search index, graph, blobs, keys), also while `serve` runs."""
        from ctxstore.runtime.data_dir_ops import BackupError, backup_data_dir

        source = server_settings(data_dir).data_dir
        try:
            manifest = backup_data_dir(source, Path(to))
        except BackupError as exc:
            print(f"ctxstore: {exc}", file=sys.stderr)
            raise typer.Exit(1) from None
        size = sum(f["size"] for f in manifest["files"].values())
        mode = "while the server ran" if manifest["server_running"] else "offline"
        print(f"backed up {source} to {to} ({len(manifest['files'])} files, {size} bytes, {mode})")

    @app.command()
    def restore(
        path: Annotated[str, typer.Argument(help="A folder written by `ctxstore backup`.")],
        data_dir: Annotated[str, typer.Option("--data-dir", help="New data dir to restore into (empty or absent).")],
    ) -> None:
        """Restore a backup into a new data dir; `ctxstore serve --data-dir` on it then starts from the backup."""
        from ctxstore.runtime.data_dir_ops import BackupError, DataDirTooNew, restore_data_dir

        try:
            manifest = restore_data_dir(Path(path), Path(data_dir))
        except (BackupError, DataDirTooNew) as exc:
            print(f"ctxstore: {exc}", file=sys.stderr)
            raise typer.Exit(1) from None
        print(f"restored {path} (taken {manifest['created_at']} by ctxstore {manifest['ctxstore']}) into {data_dir}")
