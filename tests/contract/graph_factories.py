"""Backends for the GraphStore contract suite: the local FalkorDB engine, and the Neptune Analytics adapter
answered by that engine through FakeNeptune (tests/aws/fake_neptune.py), which refuses what Neptune's
openCypher documents as unsupported.

A backend is opened once per module (one engine process); each test gets a fresh organisation, so graphs
of other tests are never in sight. `open(org)` answers (store, refused), where `refused()` is a context
for queries a test sends knowing they are invalid (kept out of the Neptune dialect audit).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from ctxstore.adapters.local.falkordb_engine import FalkorEngine
from ctxstore.adapters.local.falkordb_graph import FalkorGraphStore
from ctxstore.ports.graph import GraphStore

TIMEOUT_MS = 1000  # the engine's read and write budget in the suite
USER_GRAPHS = ("byog:db1:c1", "byog:db1:c2")  # names of user (BYOG) graphs the suite writes


@dataclass
class Backend:
    open: Callable[[str], tuple[GraphStore, Callable[[], AbstractContextManager[None]]]]
    close: Callable[[], None]


def _engine(folder: Path) -> tuple[FalkorEngine, FalkorGraphStore]:
    engine = FalkorEngine(folder / "graph", timeout_default_ms=TIMEOUT_MS, timeout_max_ms=TIMEOUT_MS)
    return engine, FalkorGraphStore(engine, grace_s=10.0)


def falkordb(folder: Path) -> Backend:
    engine, store = _engine(folder)

    def close() -> None:
        store.close()
        engine.stop()

    return Backend(lambda org: (store, contextlib.nullcontext), close)


def neptune(folder: Path) -> Backend:
    from ctxstore.adapters.aws.neptune_graph import NeptuneGraphStore
    from tests.aws.fake_neptune import FakeNeptune

    engine, inner = _engine(folder)
    saved = {k: os.environ.get(k) for k in ("AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.update({"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})

    def open_store(org: str) -> tuple[GraphStore, Callable[[], AbstractContextManager[None]]]:
        # Entity and item graphs (ctx:...) share the deployment's graph; each BYOG graph has one of its own.
        byog = {f"{org}/{name}": f"g-{org}-{i}" for i, name in enumerate(USER_GRAPHS)}
        store = NeptuneGraphStore(
            "g-shared00001", byog_graphs=byog, timeout_default_ms=TIMEOUT_MS, timeout_max_ms=TIMEOUT_MS
        )
        fake = FakeNeptune(inner, store._client, store._short_client)
        return store, fake.meant_to_be_refused

    def close() -> None:
        inner.close()
        engine.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    return Backend(open_store, close)


GRAPH_BACKENDS: dict[str, Callable[[Path], Backend]] = {"falkordb": falkordb, "neptune": neptune}


@contextlib.contextmanager
def opened(name: str, folder: Path) -> Iterator[Backend]:
    backend = GRAPH_BACKENDS[name](folder)
    try:
        yield backend
    finally:
        backend.close()
