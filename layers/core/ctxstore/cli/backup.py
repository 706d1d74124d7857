"""`ctxstore backup` and `ctxstore restore`: a consistent copy of a local data dir, taken while `serve` runs or not,
and its restore into a new data dir (docs/operations.md, "Back up and restore")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ctxstore.cli.serve import DataDirOpt, server_settings


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
