"""HttpSender with httpx: no redirects, no proxies from the environment, no pooled connections."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import httpx


class HttpxSender:
    def __init__(self) -> None:
        # No keep-alive: a pooled connection is keyed by the address it went to, and two webhook
        # hosts behind one address must not share a TLS session opened for the other's name.
        self._client = httpx.Client(
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def resolve(self, host: str, port: int) -> list[str]:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        seen: dict[str, None] = {}
        for info in infos:
            seen.setdefault(str(info[4][0]), None)
        return list(seen)

    def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
        *,
        connect_ip: str | None = None,
    ) -> tuple[int | None, str | None]:
        try:
            target = httpx.URL(url)
            send_headers = dict(headers)
            extensions: dict[str, Any] = {}
            if connect_ip is not None:
                send_headers["host"] = target.netloc.decode("ascii")
                if target.scheme == "https":
                    extensions["sni_hostname"] = target.host
                target = target.copy_with(host=connect_ip.split("%", 1)[0])
            with self._client.stream(
                "POST", target, content=body, headers=send_headers, timeout=timeout, extensions=extensions
            ) as response:
                return response.status_code, None  # the body is not read: only the status matters
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, OSError) as exc:
            return None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    def close(self) -> None:
        self._client.close()
