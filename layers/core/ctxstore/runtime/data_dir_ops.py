"""Operations on a local data dir for the CLI's `backup` and `restore` (the adapters stay behind the root)."""

from __future__ import annotations

from ctxstore.adapters.local.data_dir_backup import BackupError, backup_data_dir, restore_data_dir
from ctxstore.adapters.local.data_dir_format import DataDirTooNew

__all__ = ["BackupError", "DataDirTooNew", "backup_data_dir", "restore_data_dir"]
