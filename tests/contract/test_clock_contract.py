"""Contract of the Clock port: wall time in Unix seconds, and a monotonic time that never goes back."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contract.store_factories import CLOCKS
from tests.fakes.ports import FakeClock


@pytest.fixture(params=sorted(CLOCKS))
def clock(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    adapter, close = CLOCKS[request.param](tmp_path)
    yield adapter
    close()


def test_now_is_unix_seconds(clock: Any) -> None:
    now = clock.now()
    assert isinstance(now, float) and 1_500_000_000 < now < 4_000_000_000


def test_monotonic_never_goes_back_across_threads(clock: Any) -> None:
    seen: list[list[float]] = []

    def read() -> None:
        seen.append([clock.monotonic() for _ in range(200)])

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(a <= b for run in seen for a, b in itertools.pairwise(run))


def test_the_fake_moves_only_when_told() -> None:
    clock = FakeClock(start=1_800_000_000.0)
    assert clock.now() == clock.now() == 1_800_000_000.0
    clock.advance(90)
    assert clock.now() == 1_800_000_090.0 and clock.monotonic() == 90.0
    clock.set(1_700_000_000.0)  # wall time steps back (NTP); monotonic time does not
    assert clock.now() == 1_700_000_000.0 and clock.monotonic() == 90.0
    with pytest.raises(ValueError):
        clock.advance(-1)
