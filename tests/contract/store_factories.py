"""Adapter factories for the records, blobs, queue, scheduler, vault and clock contract suites.

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
from ctxstore.ports.blobs import BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.credential_vault import CredentialVault
from ctxstore.ports.records import RecordStore
from ctxstore.ports.scheduler import Scheduler
from ctxstore.ports.work_queue import WorkQueue
from tests.fakes.ports import (
    FakeClock,
    InMemoryBlobStore,
    InMemoryRecordStore,
    InMemoryScheduler,
    InMemoryVault,
    InMemoryWorkQueue,
)

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


# ---- the in-memory fakes (tests/fakes/ports): one instance per folder, so a reopen sees the same data ----
_MEMORY: dict[tuple[Path, str], Any] = {}


def _memory(tmp: Path, port: str, make: Callable[[], Any]) -> tuple[Any, Callable[[], None]]:
    return _MEMORY.setdefault((tmp, port), make()), lambda: None


def _memory_records(tmp: Path) -> tuple[RecordStore, Callable[[], None]]:
    return _memory(tmp, "records", InMemoryRecordStore)


def _memory_queue(tmp: Path) -> tuple[WorkQueue, Callable[[], None]]:
    return _memory(tmp, "queue", InMemoryWorkQueue)


def _memory_blobs(tmp: Path) -> tuple[BlobStore, Callable[[], None]]:
    return _memory(tmp, "blobs", InMemoryBlobStore)


RECORD_STORES["memory"] = _memory_records
BLOB_STORES["memory"] = _memory_blobs
WORK_QUEUES["memory"] = _memory_queue


# ---- AWS adapters under moto (tests/aws/moto_env.py builds the tables and bucket from template.yaml) ----
# One moto mock per tmp folder: a close followed by a reopen of the same folder sees the same data,
# so test_survives_reopen runs for these backends too.


def _moto(tmp: Path) -> tuple[Any, Callable[[], None]]:
    from tests.aws.moto_env import MotoWorld

    world = MotoWorld(tmp)
    return world, world.open()


def _dynamodb_records(tmp: Path) -> tuple[Any, Callable[[], None]]:
    from ctxstore.adapters.aws.dynamodb_records import DynamoDbRecordStore

    world, close = _moto(tmp)
    return DynamoDbRecordStore(world.names.records_table), close


def _s3_blobs(tmp: Path) -> tuple[Any, Callable[[], None]]:
    from ctxstore.adapters.aws.s3_blobs import S3BlobStore

    world, close = _moto(tmp)
    return S3BlobStore(world.names.bucket), close


def _dynamodb_queue(tmp: Path) -> tuple[Any, Callable[[], None]]:
    from ctxstore.adapters.aws.dynamodb_queue import DynamoDbWorkQueue

    world, close = _moto(tmp)
    return DynamoDbWorkQueue(world.names.jobs_table), close


RECORD_STORES["dynamodb"] = _dynamodb_records
BLOB_STORES["s3"] = _s3_blobs
WORK_QUEUES["dynamodb"] = _dynamodb_queue


# ---- scheduler, credential vault and clock (contract suites of their own) ------------------------------
def _sqlite_scheduler(tmp: Path) -> tuple[Any, Callable[[], None]]:
    from ctxstore.adapters.local.sqlite_scheduler import SqliteScheduler

    db = SqliteDb(tmp / "records.db")
    return SqliteScheduler(db), db.close


def _memory_scheduler(tmp: Path) -> tuple[Scheduler, Callable[[], None]]:
    return _memory(tmp, "scheduler", InMemoryScheduler)


def _aesgcm_vault(tmp: Path) -> tuple[Any, Callable[[], None]]:
    from ctxstore.adapters.local.aesgcm_vault import AesGcmVault

    return AesGcmVault(tmp / "vault.key"), lambda: None


_KMS_KEYS: dict[Path, str] = {}


def _kms_vault(tmp: Path) -> tuple[Any, Callable[[], None]]:
    import boto3

    from ctxstore.adapters.aws.kms_vault import KmsVault
    from tests.aws.moto_env import REGION

    _, close = _moto(tmp)
    if tmp not in _KMS_KEYS:  # one key per folder, so a reopen opens what was sealed before
        _KMS_KEYS[tmp] = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]
    return KmsVault(_KMS_KEYS[tmp]), close


def _memory_vault(tmp: Path) -> tuple[CredentialVault, Callable[[], None]]:
    return _memory(tmp, "vault", InMemoryVault)


def _system_clock(tmp: Path) -> tuple[Any, Callable[[], None]]:
    from ctxstore.adapters.system.system_clock import SystemClock

    return SystemClock(), lambda: None


def _fake_clock(tmp: Path) -> tuple[Clock, Callable[[], None]]:
    return FakeClock(), lambda: None


SCHEDULERS: dict[str, Factory] = {"sqlite": _sqlite_scheduler, "memory": _memory_scheduler}
VAULTS: dict[str, Factory] = {"aesgcm": _aesgcm_vault, "kms": _kms_vault, "memory": _memory_vault}
CLOCKS: dict[str, Factory] = {"system": _system_clock, "fake": _fake_clock}
