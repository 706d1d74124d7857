"""A local app with one ready database (DB), for the pipeline tests that drive ingestion through it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.app import LocalApp, make_app

DB = "d"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LocalApp]:
    la = make_app(tmp_path / "data")
    la.create_ready_database(DB)
    yield la
    la.close()


def org_of(app: LocalApp) -> str:
    return app.services.keys.authenticate(app.key).org
