"""The fake OpenSearch Serverless collection served from another process, as the real collection is.

The OpenSearch adapter runs unchanged in the test process (opensearch-py, SigV4, its bulk helper); only the
transport differs: `RemoteTransport` hands each signed request to a `FakeCollection` living in a manager
process. What the collection stores is then not part of the memory a test measures in this process, and
the transport keeps only each request's path and size.
"""

from __future__ import annotations

import json
import multiprocessing
from multiprocessing.managers import BaseManager
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests
from requests.adapters import BaseAdapter

from tests.aws import fake_opensearch
from tests.aws.fake_opensearch import FakeCollection, Request, json_response


def _has_fast(value: Any, wanted: list[Any]) -> bool:
    """fake_opensearch._has with the wanted list as a set, built once per query: a `terms` filter over 500
    chunk ids checked against every stored document is otherwise 500 comparisons each (minutes for 20k)."""
    entry = _WANTED.get(id(wanted))
    if entry is None or entry[0] is not wanted:
        entry = (wanted, {v for v in wanted if v is not None})
        _WANTED.clear()
        _WANTED[id(wanted)] = entry
    values = value if isinstance(value, list) else [value]
    return any(v in entry[1] for v in values)


_WANTED: dict[int, tuple[list[Any], set[Any]]] = {}


class CollectionServer:
    """Runs in the manager process: parses a request the way RecordingAdapter does and answers it."""

    def __init__(self) -> None:
        if hasattr(fake_opensearch, "_has"):  # the same answers, faster (this process only)
            fake_opensearch._has = _has_fast
        self._collection = FakeCollection()

    def handle(self, method: str, path: str, query: str, raw: bytes) -> tuple[int, bytes]:
        text = raw.decode()
        if path.endswith("/_bulk"):
            body: Any = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            body = json.loads(text) if text else None
        status, payload = self._collection.handle(Request(method, path, parse_qs(query), body, {}))
        return status, b"" if payload is None else json.dumps(payload).encode()


class CollectionManager(BaseManager):
    pass


CollectionManager.register("CollectionServer", CollectionServer)


def start_server() -> tuple[CollectionManager, Any]:
    """A manager process (spawned: this process may run threads) and its collection's proxy."""
    manager = CollectionManager(ctx=multiprocessing.get_context("spawn"))
    manager.start()
    return manager, manager.CollectionServer()  # type: ignore[attr-defined]


class RemoteTransport(BaseAdapter):
    """A `requests` transport that sends each request to the collection server; records (method, path, bytes)."""

    def __init__(self, server: Any) -> None:
        super().__init__()
        self.server = server
        self.sent: list[tuple[str, str, int]] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        url = urlparse(request.url or "")
        body = request.body or b""
        raw = body if isinstance(body, bytes) else str(body).encode()
        self.sent.append((request.method or "", url.path, len(raw)))
        status, payload = self.server.handle(request.method or "", url.path, url.query, raw)
        return json_response(request, status, payload)

    def close(self) -> None:
        pass
