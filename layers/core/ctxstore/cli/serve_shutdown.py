"""How `ctxstore serve` stops on SIGTERM/SIGINT: a drain within one bound (CTXSTORE_SHUTDOWN_TIMEOUT_S).

From the signal: uvicorn stops accepting connections and the requests in flight finish (first half of the
bound); meanwhile the workers claim nothing new and finish the jobs they hold, until 70% of the bound, then
the jobs of workers still busy go back to the queue, ready at once; the stores close in the rest. Past the bound
a watchdog ends the process (exit 1): what was not finished is in the queue or re-queued at the next start.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

log = logging.getLogger("ctxstore")

HTTP_SHARE = 0.5
WORKER_SHARE = 0.7


@dataclass(frozen=True)
class ShutdownPlan:
    bound_s: float

    @property
    def http_s(self) -> int:
        """uvicorn's graceful timeout (whole seconds): requests still running after it are cancelled."""
        return max(1, int(self.bound_s * HTTP_SHARE))

    def workers_left(self, started: float) -> float:
        """Seconds the workers may still take, from `started` (the signal, time.monotonic)."""
        return max(0.0, started + self.bound_s * WORKER_SHARE - time.monotonic())


class DrainingServer(uvicorn.Server):
    """uvicorn's server that tells `on_stop` when its graceful shutdown begins, so the workers drain while the
    requests in flight finish (not after them)."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_stop = on_stop
        self.stopping_since: float | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Runs on the event loop, not in the signal handler: taking the workers' locks here is safe.
        self.stopping_since = time.monotonic()
        self._on_stop()
        await super().shutdown(sockets)


def exit_without_teardown(code: int) -> None:
    """os._exit after flushing what the process printed and logged (no interpreter teardown)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def watchdog(
    plan: ShutdownPlan, started: float, *, exit_now: Callable[[int], None] = exit_without_teardown
) -> threading.Event:
    """Ends the process at `started` + the bound unless the returned event is set first (a clean exit)."""
    done = threading.Event()

    def watch() -> None:
        if not done.wait(max(0.0, started + plan.bound_s - time.monotonic())):
            log.error(
                "shutdown took longer than %.0fs: exiting now; the next start runs the unfinished jobs", plan.bound_s
            )
            exit_now(1)

    threading.Thread(target=watch, name="ctxstore-shutdown-watchdog", daemon=True).start()
    return done
