"""The ports one running service uses; filled by the composition root (ctxstore.runtime) for every entry point."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

from ctxstore.config import Settings
from ctxstore.ports.blobs import BlobStore
from ctxstore.ports.clock import Clock
from ctxstore.ports.connector_provider import ConnectorProvider
from ctxstore.ports.credential_vault import CredentialVault
from ctxstore.ports.embedder import Embedder
from ctxstore.ports.extractor import Extractor, MemoryInferrer
from ctxstore.ports.graph import GraphStore
from ctxstore.ports.http_sender import HttpSender
from ctxstore.ports.records import RecordStore
from ctxstore.ports.reranker import Reranker
from ctxstore.ports.scheduler import Scheduler
from ctxstore.ports.search_index import SearchIndex
from ctxstore.ports.work_queue import WorkQueue
from ctxstore.ports.workflow import WorkflowStarter
from ctxstore.services.webhooks.events import EventSink, NullSink

T = TypeVar("T")


@dataclass(frozen=True)
class Capabilities:
    """What this deployment can do, decided by the composition root (the one place that knows the backend)."""

    # Item and sync locks held in this process's memory (one `serve` process) rather than leased in the store
    # (many Lambda instances).
    single_process: bool = True
    # GET /openapi.json answers the document shipped in the layer (a Lambda holds one router group of the API).
    serves_static_openapi: bool = False
    # The in-process admission gate (http/admission.py): for the one local process; a Lambda instance serves
    # one request at a time.
    admission_gate: bool = True
    # Console uploads above this many bytes go to blob storage by reference (0: only the file-size cap).
    console_inline_upload_max_bytes: int = 0
    # BYOG collections the graph store hosts: None = every one (local FalkorDB); on AWS only the
    # `<org>/<graph name>` keys an operator mapped to a graph of their own (CTXSTORE_BYOG_GRAPH_IDS).
    byog_graphs: frozenset[str] | None = None


class _Slot(Generic[T]):
    """One port of the container: set directly, or built on first read from a factory the composition root gave.

    Lazy slots let one Lambda function build only the adapters its handler touches (a health check builds none,
    a query function never imports the connector SDKs), while `serve` fills every slot up front.
    """

    def __init__(self, default: Callable[[], T] | None = None) -> None:
        self._default = default
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Slot[T]: ...

    @overload
    def __get__(self, obj: Container, owner: type | None = None) -> T: ...

    def __get__(self, obj: Container | None, owner: type | None = None) -> T | _Slot[T]:
        if obj is None:
            return self
        values = obj.__dict__
        if self._name in values:
            return cast(T, values[self._name])
        with obj._build_lock:
            if self._name not in values:  # another thread may have built it while this one waited
                factory = obj._factories.pop(self._name, None) or self._default
                if factory is None:
                    raise LookupError(f"the container has no {self._name!r} port (the composition root set none)")
                values[self._name] = factory()
        return cast(T, values[self._name])

    def __set__(self, obj: Container, value: T) -> None:
        obj._factories.pop(self._name, None)  # a value set by hand replaces the root's factory
        obj.__dict__[self._name] = value


def _none() -> None:
    return None


class Container:
    """The ports of one running instance. The composition root (ctxstore.runtime) fills it: `serve` with built
    adapters, a Lambda function with factories that run on first use (`Container(factories=...)`)."""

    records = _Slot[RecordStore]()
    blobs = _Slot[BlobStore]()
    queue = _Slot[WorkQueue]()
    clock = _Slot[Clock]()
    # Optional ports: None where the deployment has no backend for them.
    search_index = _Slot[SearchIndex | None](_none)
    graph = _Slot[GraphStore | None](_none)
    embedder = _Slot[Embedder | None](_none)
    extractor = _Slot[Extractor | None](_none)
    inferrer = _Slot[MemoryInferrer | None](_none)
    reranker = _Slot[Reranker | None](_none)  # optional passage reranker for thinking mode (e.g. Bedrock)
    workflow = _Slot[WorkflowStarter | None](_none)  # starts ingestion (local queue or Step Functions)
    events = _Slot[EventSink](NullSink)  # webhooks replace it in build_services
    scheduler = _Slot[Scheduler | None](_none)
    http_sender = _Slot[HttpSender | None](_none)  # outbound webhook delivery
    vault = _Slot[CredentialVault | None](_none)  # connector credentials at rest
    connector_providers = _Slot[dict[str, ConnectorProvider]](dict)

    def __init__(
        self,
        *,
        settings: Settings | None = None,
        capabilities: Capabilities | None = None,
        factories: Mapping[str, Callable[[], Any]] | None = None,
        **ports: Any,
    ) -> None:
        # The settings the services take their groups from; a bare container has the defaults (no environment).
        self.settings = settings or Settings.model_construct()
        self.capabilities = capabilities or Capabilities()
        self.closers: list[Any] = []
        self._build_lock = threading.RLock()
        unknown = [n for n in [*ports, *(factories or {})] if not isinstance(getattr(Container, n, None), _Slot)]
        if unknown:
            raise TypeError(f"Container has no port named {', '.join(sorted(unknown))}")
        self._factories: dict[str, Callable[[], Any]] = dict(factories or {})
        for name, value in ports.items():
            setattr(self, name, value)

    def defer(self, name: str, factory: Callable[[], Any]) -> None:
        """Build port `name` with `factory` the first time it is read (unless a value is set before)."""
        if not isinstance(getattr(Container, name, None), _Slot):
            raise TypeError(f"Container has no port named {name}")
        self._factories[name] = factory

    def configured(self, name: str) -> bool:
        """Whether a port has a backend, without building it (a factory counts; a None value does not)."""
        if name in self._factories:
            return True
        return self.__dict__.get(name) is not None

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()
        self.closers.clear()
