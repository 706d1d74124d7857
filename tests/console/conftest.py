from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from tests.console.browser import INLINE_MAX_BYTES, Recorder, chromium, new_context
from tests.fakes.slack_api import FakeSlack
from tests.support.connectors import connector_env
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    """The fake Slack Web API every console server's connectors talk to (through slack-sdk)."""
    with FakeSlack() as fake:
        yield fake


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("console") / "data"
    env = {
        "CTXSTORE_WEBHOOK_MAX_ATTEMPTS": "1",  # a refused delivery fails for good at once: the page retries it
        # Files over 64 KiB (the flows' 93 KB PDF) go by reference, as over 4 MiB on AWS; smaller ones inline.
        "CTXSTORE_CONSOLE_INLINE_UPLOAD_MAX_BYTES": str(INLINE_MAX_BYTES),
        **connector_env(slack),
    }
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


# A browser module's tests run in order on one page and build on each other (what one made, the next uses).
@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return {}


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = new_context(browser)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def page(context: BrowserContext, recorder: Recorder) -> Page:
    p = context.new_page()
    recorder.attach(p)
    return p
