from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.app import LocalApp, make_app
from tests.support.connectors import Env, running_server


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "data")
    yield la
    la.close()


@pytest.fixture
def other_key(local: LocalApp) -> str:
    """A key of a second organisation."""
    return local.services.keys.create("other")


@pytest.fixture(scope="session")
def connector_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """One real `ctxstore serve` on the fake Slack API, shared by the connector route and sync tests."""
    yield from running_server(tmp_path_factory.mktemp("connectors") / "data")
