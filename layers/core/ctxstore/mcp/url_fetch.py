"""Download a document an agent names by URL, under the server's outbound-address policy.

The same rule set as webhooks (`domain/network_policy.py`): http(s) only, every address the host resolves
to must be public (unless private targets are allowed), cloud metadata never; the connection goes to the
vetted address (Host header and TLS name kept) so DNS cannot change in between; redirects are followed by
hand, each hop vetted again; proxies from the environment are ignored; at most 50 MB are read.
"""

from __future__ import annotations

import mimetypes
import re
import socket
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urljoin

import httpx

from ctxstore.domain.network_policy import address_refusal

MAX_BYTES = 50 * 1024 * 1024
MAX_REDIRECTS = 5
TIMEOUT_S = 30.0
_DISPOSITION_NAME = re.compile(r"""filename\*?=(?:UTF-8'')?"?([^";]+)"?""", re.IGNORECASE)


class FetchRefused(Exception):
    """The URL may not be fetched or did not give a document; the message says why."""


@dataclass(frozen=True)
class Fetched:
    filename: str
    data: bytes
    content_type: str | None


def _vetted_ip(url: httpx.URL, allow_private: bool) -> str:
    if url.scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https URLs can be fetched, not '{url.scheme}'")
    if not url.host:
        raise FetchRefused("the URL has no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(url.host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchRefused(f"host '{url.host}' does not resolve: {exc}") from None
    addresses = list(dict.fromkeys(str(i[4][0]) for i in infos))
    for ip in addresses:
        reason = address_refusal(ip, allow_private=allow_private)
        if reason is not None:
            raise FetchRefused(f"host '{url.host}' resolves to {reason}; only public addresses can be fetched")
    return addresses[0]


def _filename(url: httpx.URL, headers: httpx.Headers, content_type: str | None) -> str:
    match = _DISPOSITION_NAME.search(headers.get("content-disposition", ""))
    name = unquote(match.group(1)).strip() if match else PurePosixPath(unquote(url.path)).name
    name = name.replace("/", "_") or "download"
    if not PurePosixPath(name).suffix and content_type:  # the API decides the format by extension first
        ext = mimetypes.guess_extension(content_type)
        if ext:
            name += ext
    return name


def fetch(raw_url: str, *, allow_private: bool = False) -> Fetched:
    url = httpx.URL(raw_url)
    with httpx.Client(follow_redirects=False, trust_env=False, timeout=TIMEOUT_S) as http:
        for _ in range(MAX_REDIRECTS + 1):
            ip = _vetted_ip(url, allow_private)
            target = url.copy_with(host=ip.split("%", 1)[0])
            extensions: dict[str, Any] = {"sni_hostname": url.host} if url.scheme == "https" else {}
            headers = {"host": url.netloc.decode("ascii"), "user-agent": "ctxstore-fetch"}
            try:
                with http.stream("GET", target, headers=headers, extensions=extensions) as response:
                    if response.is_redirect and response.headers.get("location"):
                        url = httpx.URL(urljoin(str(url), response.headers["location"]))
                        continue
                    if not response.is_success:
                        raise FetchRefused(f"GET {raw_url} answered HTTP {response.status_code}")
                    body = bytearray()
                    for chunk in response.iter_bytes():
                        body.extend(chunk)
                        if len(body) > MAX_BYTES:
                            raise FetchRefused(f"{raw_url} is larger than the 50 MB per-file limit")
                    ctype = response.headers.get("content-type", "").split(";")[0].strip() or None
                    return Fetched(_filename(url, response.headers, ctype), bytes(body), ctype)
            except httpx.HTTPError as exc:
                raise FetchRefused(f"GET {raw_url} failed: {type(exc).__name__}: {exc}") from None
    raise FetchRefused(f"{raw_url} redirected more than {MAX_REDIRECTS} times")
