"""Reliability tests against a data dir at size (issue 28 goal 5, a diagnostic run).

    CTXSTORE_TEST_DATA_DIR=/work/benchdata/copy/data CTXSTORE_TEST_KEY=csk_... pytest tests/reliability/...

names a data dir to run against as it is (give a copy: the tests write to it and kill its server) and its
API key. Unset, each test gets a fresh data dir and the key its server prints.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.server import ServerProcess


def data_dir(fresh: Path) -> Path:
    given = os.environ.get("CTXSTORE_TEST_DATA_DIR")
    return Path(given) if given else fresh


def at_size() -> bool:
    return bool(os.environ.get("CTXSTORE_TEST_DATA_DIR"))


def api_key(srv: ServerProcess) -> str:
    if at_size():
        return os.environ["CTXSTORE_TEST_KEY"]
    [key] = srv.printed_keys
    return key


def ready_timeout() -> float:
    return 300.0 if at_size() else 90.0  # a large index opens its files and snapshots first
