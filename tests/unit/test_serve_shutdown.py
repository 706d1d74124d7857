"""The stop bound of `ctxstore serve` (CTXSTORE_SHUTDOWN_TIMEOUT_S): its shares, and the watchdog that holds it."""

from __future__ import annotations

import time

from ctxstore.cli.serve_shutdown import ShutdownPlan, watchdog


def test_the_bound_splits_into_requests_then_workers_then_the_stores() -> None:
    plan = ShutdownPlan(30.0)
    assert plan.http_s == 15
    started = time.monotonic()
    assert 20.5 < plan.workers_left(started) <= 21.0
    assert plan.workers_left(started - 60) == 0.0


def test_the_watchdog_ends_a_stop_that_overruns_the_bound() -> None:
    codes: list[int] = []
    watchdog(ShutdownPlan(0.2), time.monotonic(), exit_now=codes.append)
    time.sleep(0.6)
    assert codes == [1]


def test_a_clean_exit_in_time_disarms_the_watchdog() -> None:
    codes: list[int] = []
    done = watchdog(ShutdownPlan(0.3), time.monotonic(), exit_now=codes.append)
    done.set()
    time.sleep(0.6)
    assert codes == []
