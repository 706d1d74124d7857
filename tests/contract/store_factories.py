"""Adapter factories for the records, blobs and queue contract suites.

Each factory takes a temporary folder and returns (adapter, close). Adapters
for other backends join by appending a factory here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxstore.adapters.local.fs_blobs import FsBlobStore
from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
from ctxstore.adapters.local.sqlite_records import SqliteRecordStore

Factory = Callable[[Path], tuple[Any, Callable[[], None]]]


def _sqlite_records(tmp: Path) -> tuple[Any, Callable[[], None]]:
    db = SqliteDb(tmp / "records.db")
    return SqliteRecordStore(db), db.close


def _sqlite_queue(tmp: Path) -> tuple[Any, Callable[[], None]]:
    db = SqliteDb(tmp / "records.db")
    return SqliteWorkQueue(db), db.close


def _fs_blobs(tmp: Path) -> tuple[Any, Callable[[], None]]:
    return FsBlobStore(tmp / "blobs"), lambda: None


RECORD_STORES: dict[str, Factory] = {"sqlite": _sqlite_records}
BLOB_STORES: dict[str, Factory] = {"fs": _fs_blobs}
WORK_QUEUES: dict[str, Factory] = {"sqlite": _sqlite_queue}
