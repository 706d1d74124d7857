from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.app import LocalApp, make_app


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "data")
    yield la
    la.close()


@pytest.fixture
def other_key(local: LocalApp) -> str:
    """A key of a second organisation."""
    return local.services.keys.create("other")
