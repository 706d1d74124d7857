from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.console.browser import chromium
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("console") / "data"
    env = {"CTXSTORE_WEBHOOK_MAX_ATTEMPTS": "1"}  # a refused delivery fails for good at once: the page retries it
    with ServerProcess(Path(data), "--allow-private-webhooks", env=env) as srv:
        srv.wait_ready(90)
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def admin_key(server: ServerProcess) -> str:
    return server.printed_keys[0]
