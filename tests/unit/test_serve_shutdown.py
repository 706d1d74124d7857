"""The stop bound of `ctxstore serve` (CTXSTORE_SHUTDOWN_TIMEOUT_S): its shares, and the watchdog that holds it."""

from __future__ import annotations

import threading
import time

from ctxstore.cli.serve_shutdown import ShutdownPlan, watchdog
from ctxstore.http.observe_routes import Observability
from ctxstore.runtime.observability import Running


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


def test_the_stop_waits_for_the_warm_up_and_says_when_it_is_still_running() -> None:
    # serve leaves without interpreter teardown when this is False (a warm-up inside the model's native code
    # aborts the teardown); True once the warm-up has ended.
    release = threading.Event()
    warming = threading.Thread(target=release.wait, daemon=True)
    warming.start()
    running = Running(Observability(), warming=[warming])
    started = time.monotonic()
    assert running.wait_warmed(0.2) is False
    assert 0.15 < time.monotonic() - started < 2
    threading.Timer(0.1, release.set).start()
    assert running.wait_warmed(5) is True
