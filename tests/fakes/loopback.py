"""What every loopback fake of a provider API shares: a threaded HTTP server on a free port, started and
stopped in a daemon thread, usable as a context manager; a JSON-answering handler base; the token endpoint's
books; the call log with its injected failures."""

from __future__ import annotations

import json
import sys
import threading
import uuid
from abc import ABC, abstractmethod
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a killed server) is expected here, not an error to print."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LoopbackFake:
    """Subclasses call `_listen(handler class)` in their __init__."""

    thread_name = "fake-api"

    def _listen(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = QuietServer(("127.0.0.1", 0), handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for a serve loop: one never started would hang it
            self._server.shutdown()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler whose answers are JSON. Fakes subclass it inside a closure over the fake."""

    protocol_version = "HTTP/1.1"
    content_type = "application/json; charset=utf-8"

    def log_message(self, format: str, *args: Any) -> None:  # tests read the fake's call log instead
        return

    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(raw)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)


class RestHandler(JsonHandler, ABC):
    """A JSON handler that serves GET and POST through one `_serve(verb)`, which each fake defines."""

    @abstractmethod
    def _serve(self, verb: str) -> None: ...

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")


class OAuthClients:
    """A token endpoint's books: OAuth clients and the single-use refresh tokens issued to them.
    Subclasses call `_oauth_books()` in their __init__ (after creating `self._lock`)."""

    refresh_token_format = "refresh-{n}"  # {n}: the issue counter; {rand}: 8 random hex digits
    _lock: threading.RLock

    def _oauth_books(self) -> None:
        self.clients: dict[str, str] = {}  # client id -> secret
        self.refresh_tokens: dict[str, str] = {}  # refresh token -> client id
        self._issued = 0  # a counter for every token issued (refresh and access)

    def add_oauth_client(self, client_id: str, secret: str) -> None:
        with self._lock:
            self.clients[client_id] = secret

    def issue_refresh_token(self, client_id: str) -> str:
        with self._lock:
            self._issued += 1
            value = self.refresh_token_format.format(n=self._issued, rand=uuid.uuid4().hex[:8])
            self.refresh_tokens[value] = client_id
            return value

    def revoke_refresh_tokens(self) -> None:
        with self._lock:
            self.refresh_tokens.clear()


class _Expiring(Protocol):
    times: int  # how many more calls the failure answers


CallT = TypeVar("CallT")
FailureT = TypeVar("FailureT", bound=_Expiring)


class CallLog(Generic[CallT, FailureT]):
    """The calls a fake answered, and failures injected per call name (each answers `times` calls, then goes).
    Subclasses name the Call field `calls_of` matches and call `_call_log()` in their __init__."""

    call_name_field: ClassVar[str] = "method"
    _lock: threading.RLock

    def _call_log(self) -> None:
        self.calls: list[CallT] = []
        self.failures: dict[str, list[FailureT]] = {}

    def _inject(self, name: str, failure: FailureT) -> None:
        with self._lock:
            self.failures.setdefault(name, []).append(failure)

    def _take_failure(self, name: str) -> FailureT | None:
        queue = self.failures.get(name)
        if not queue:
            return None
        failure = queue[0]
        failure.times -= 1
        if failure.times <= 0:
            queue.pop(0)
        return failure

    def calls_of(self, name: str) -> list[CallT]:
        with self._lock:
            return [c for c in self.calls if getattr(c, self.call_name_field) == name]

    def clear_calls(self) -> None:
        with self._lock:
            self.calls.clear()
