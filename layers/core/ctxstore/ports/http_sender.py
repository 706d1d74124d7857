"""Outbound HTTP for webhook delivery: resolve a host, POST a body. No redirects are followed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class HttpSender(Protocol):
    def resolve(self, host: str, port: int) -> list[str]:
        """Every IP address `host` resolves to (an IP literal resolves to itself).

        Raises OSError when the name does not resolve.
        """
        ...

    def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
        *,
        connect_ip: str | None = None,
    ) -> tuple[int | None, str | None]:
        """POST once; (HTTP status, None) when a response came back, (None, error text) on a network error.

        With `connect_ip` the connection goes to that address (already vetted by the caller) while the
        Host header and TLS server name stay those of the URL, so DNS cannot change between the check
        and the connection. Redirects are never followed: a 3xx is returned as it is.
        """
        ...
