"""Local adapters of the connector machinery: the AES-GCM credential vault and the SQLite scheduler."""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path

import pytest

from ctxstore.adapters.local.aesgcm_vault import AesGcmVault
from ctxstore.adapters.local.sqlite_db import SqliteDb
from ctxstore.adapters.local.sqlite_queue import SqliteWorkQueue
from ctxstore.adapters.local.sqlite_scheduler import SqliteScheduler
from ctxstore.adapters.system.system_clock import SystemClock
from ctxstore.ports.credential_vault import VaultError
from ctxstore.services.connectors.scheduling import SYNC_QUEUE, SyncScheduling


def test_vault_key_is_private_and_ciphertexts_are_bound_to_their_connector(tmp_path: Path) -> None:
    key = tmp_path / "connector_credentials.key"
    vault = AesGcmVault(key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    sealed = vault.seal("org1", "conn_a", b'{"access_token":"xoxb-secret"}')
    assert b"xoxb-secret" not in sealed.encode()
    assert AesGcmVault(key).open("org1", "conn_a", sealed) == b'{"access_token":"xoxb-secret"}'  # survives restart
    for org, owner in (("org2", "conn_a"), ("org1", "conn_b")):
        with pytest.raises(VaultError):
            vault.open(org, owner, sealed)
    with pytest.raises(VaultError):
        vault.open("org1", "conn_a", sealed[:-4] + "AAAA")
    key.chmod(0o644)  # loosened by hand: narrowed again on load
    AesGcmVault(key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_scheduler_hands_out_due_schedules_once_per_interval_and_survives_reopen(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "records.db")
    s = SqliteScheduler(db)
    now = time.time()
    s.upsert("o1", "c1", every_s=60, next_at=now - 1, payload={"connector_id": "c1"})
    s.upsert("o2", "c1", every_s=60, next_at=now + 30, payload={"connector_id": "c1"})
    [due] = s.due(now)
    assert (due.org, due.schedule_id, due.payload) == ("o1", "c1", {"connector_id": "c1"})
    assert s.due(now) == []  # advanced by its interval as it was handed out
    assert s.next_at("o1", "c1") == pytest.approx(now + 60)
    db.close()
    s2 = SqliteScheduler(SqliteDb(tmp_path / "records.db"))
    assert sorted(d.org for d in s2.due(now + 61)) == ["o1", "o2"]  # earliest first
    assert s2.cancel("o1", "c1") is True and s2.cancel("o1", "c1") is False
    assert s2.count() == 1


def test_a_manual_sync_waits_for_the_finishing_chunk_to_release_its_job(tmp_path: Path) -> None:
    """The chunk writes `idle` before its worker acknowledges the job: a sync asked for in that gap is
    queued once the job is released, not refused as "already running"."""
    queue = SqliteWorkQueue(SqliteDb(tmp_path / "queue.db"))
    scheduling = SyncScheduling(queue, None, SystemClock())
    assert scheduling.enqueue("o1", "c1", "manual")
    [job] = queue.claim(SYNC_QUEUE, lease_s=60)
    assert scheduling.enqueue("o1", "c1", "manual") is None  # leased: refused at once
    release = threading.Timer(0.3, queue.complete, args=(job,))
    release.start()
    run_id = scheduling.enqueue_once_released("o1", "c1", "manual")
    release.join()
    assert run_id is not None and queue.pending(SYNC_QUEUE) == 1
    [job] = queue.claim(SYNC_QUEUE, lease_s=60)
    assert scheduling.enqueue_once_released("o1", "c1", "manual") is None  # never released: still refused
