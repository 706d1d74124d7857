"""Readiness: whether the first query would answer now, apart from whether the process is alive (/health).

Each engine that loads after start (the graph engine replaying its file, the vector scopes read into memory)
is a named part that is `loading` until its warm-up ends (`ready`) or fails (`failed`: the part loads again
on first use, as before, so the server still answers; /ready says which part failed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger("ctxstore.ready")

LOADING, READY, FAILED = "loading", "ready", "failed"


@dataclass(frozen=True)
class Part:
    state: str
    seconds: float | None = None  # how long its warm-up took
    error: str = ""


class Readiness:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[str, Part] = {}

    def loading(self, name: str) -> None:
        with self._lock:
            self._parts[name] = Part(LOADING)

    def settle(self, name: str, seconds: float, error: str = "") -> None:
        with self._lock:
            self._parts[name] = Part(FAILED if error else READY, round(seconds, 3), error)

    @property
    def ready(self) -> bool:
        with self._lock:
            return all(p.state == READY for p in self._parts.values())

    def parts(self) -> dict[str, Part]:
        with self._lock:
            return dict(self._parts)


Step = tuple[str, Callable[[], object]]


def warm_up(readiness: Readiness, steps: Sequence[Step]) -> list[threading.Thread]:
    """Run the warm-up steps at once, each on a background thread; every part is `loading` before this returns.

    At once: the graph engine loads in its own process, the vectors read SQLite and the embedding model builds its
    sessions, so a restart waits for the slowest of them rather than their sum."""
    for name, _ in steps:
        readiness.loading(name)

    def run(name: str, step: Callable[[], object]) -> None:
        started = time.perf_counter()
        try:
            step()
        except Exception as exc:
            log.exception("warm-up of %s failed", name)
            readiness.settle(name, time.perf_counter() - started, error=f"{type(exc).__name__}: {exc}")
        else:
            seconds = time.perf_counter() - started
            log.info("%s ready after %.2f s", name, seconds)
            readiness.settle(name, seconds)

    threads = [
        threading.Thread(target=run, args=(name, step), name=f"ctxstore-warm-up-{name}", daemon=True)
        for name, step in steps
    ]
    for thread in threads:
        thread.start()
    return threads
