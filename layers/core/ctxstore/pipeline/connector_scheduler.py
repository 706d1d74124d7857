"""The local connector scheduler of `ctxstore serve`: a thread that queues due syncs every tick.

Due times live in the SQLite scheduler (persisted `next_sync_at`), so they survive a restart; the sync
chunks run on their own LocalRunner over the `connectors` queue (one job per connector at a time).
"""

from __future__ import annotations

import logging
import threading

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.services.connectors.scheduling import SyncScheduling

log = logging.getLogger("ctxstore.connectors")


class SchedulerLoop:
    def __init__(self, scheduling: SyncScheduling, *, tick_s: float = 1.0) -> None:
        self._scheduling = scheduling
        self._tick_s = max(0.01, tick_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="ctxstore-connector-scheduler", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Queue no more syncs (a drain's first step); `stop` then waits for the thread."""
        self._stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def tick(self) -> int:
        return self._scheduling.enqueue_due()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                queued = self.tick()
                if queued:
                    log.info("queued %d scheduled connector sync(s)", queued)
            except StoreUnavailable as exc:
                log.warning("connector scheduler paused: storage unavailable: %s", exc)
            except Exception:  # the loop must outlive any one bad tick
                log.exception("connector scheduler tick failed")
            self._stop.wait(self._tick_s)
