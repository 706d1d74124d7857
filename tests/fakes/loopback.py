"""What every loopback fake of a provider API shares: a threaded HTTP server on a free port, started and
stopped in a daemon thread, usable as a context manager."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


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
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class OAuthClients:
    """A token endpoint's books: OAuth clients and the single-use refresh tokens issued to them.
    Subclasses call `_oauth_books()` in their __init__ (after creating `self._lock`)."""

    refresh_token_format = "refresh-{n}"
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
            value = self.refresh_token_format.format(n=self._issued)
            self.refresh_tokens[value] = client_id
            return value

    def revoke_refresh_tokens(self) -> None:
        with self._lock:
            self.refresh_tokens.clear()
