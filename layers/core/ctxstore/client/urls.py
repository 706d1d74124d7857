"""The server's base URL as people type it: `localhost:8080` means `http://localhost:8080`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

# `name:` followed by something other than a port number: the start of a URL scheme (`http:/x`, `ftp://x`).
_SCHEME_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:(?!\d)")
EXAMPLE = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class BaseUrl:
    url: str  # scheme, host, optional port and path prefix; no trailing slash
    scheme_assumed: bool  # the text had no scheme and http:// was put in front


def parse_base_url(raw: str) -> BaseUrl:
    """Check a server URL and complete a bare `host:port` with `http://`. ValueError says what is wrong with it."""
    text = raw.strip()
    if not text:
        raise ValueError(f"the server URL is empty; give one such as {EXAMPLE}")
    assumed = "://" not in text
    if assumed and _SCHEME_LIKE.match(text):
        raise ValueError(f"'{raw}' is not a valid URL (a scheme needs '://'); give one such as {EXAMPLE}")
    url = f"http://{text}" if assumed else text
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"'{raw}' is not an http or https URL; give one such as {EXAMPLE}")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked for it
    except ValueError:
        raise ValueError(f"'{raw}' has an invalid port; give one such as {EXAMPLE}") from None
    if not parts.hostname:
        raise ValueError(f"'{raw}' names no host; give one such as {EXAMPLE}")
    if parts.query or parts.fragment:
        raise ValueError(f"'{raw}' has a query or fragment; give the server's base URL only, such as {EXAMPLE}")
    return BaseUrl(url.rstrip("/"), assumed)
