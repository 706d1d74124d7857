"""Where the client verbs find the server, the key and the default scope: flags, environment, config file.

Order: a flag wins over its environment variable (CTXSTORE_URL, CTXSTORE_API_KEY, CTXSTORE_DATABASE,
CTXSTORE_COLLECTION), which wins over the file `ctxstore login` writes (mode 0600), which wins over the
default URL http://127.0.0.1:8080.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.client import CtxstoreClient
    from ctxstore.client.transport import Transport

DEFAULT_URL = "http://127.0.0.1:8080"


class SettingError(ValueError):
    """A setting that cannot work (a malformed URL), with what to do about it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def checked_url(raw: str, source: str) -> tuple[str, bool]:
    """The URL to use (http:// put in front of a bare host:port) and whether the scheme was assumed."""
    from ctxstore.client.urls import parse_base_url  # the client loads when a verb runs, not for --help

    try:
        parsed = parse_base_url(raw)
    except ValueError as exc:
        where = {"flag": "--url", "default": "the default"}.get(source, source)
        raise SettingError(
            f"{exc} (the server URL from {where})",
            "pass --url http://HOST:PORT, or fix CTXSTORE_URL or the config file (`ctxstore login --url ...`)",
        ) from None
    return parsed.url, parsed.scheme_assumed


def config_path(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("CTXSTORE_CONFIG"):
        return Path(os.environ["CTXSTORE_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ctxstore" / "config.json"


def read_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SettingError(
            f"cannot read the config file {path}: {exc}",
            "fix or delete that file (`ctxstore logout` deletes it), then `ctxstore login` again",
        ) from None
    return data if isinstance(data, dict) else {}


def write_config(path: Path, values: dict[str, Any]) -> None:
    """Write the file readable by its owner only (it holds an API key): created 0600, never widened."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(values, fh, indent=2)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


@dataclass
class Settings:
    """The resolved connection, and where each value came from (for `doctor` and error hints)."""

    url: str = DEFAULT_URL
    api_key: str | None = None
    database: str | None = None
    collection: str | None = None
    timeout: float = 60.0
    sources: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None
    scheme_assumed: bool = False  # the URL was a bare host:port: http:// was put in front

    def url_note(self) -> str | None:
        """What to tell the person when the URL was completed (None when it was complete)."""
        if not self.scheme_assumed:
            return None
        return f"note: the server URL has no scheme; using {self.url} (write https:// for TLS)"

    def client(self, database: str | None = None, collection: str | None = None) -> CtxstoreClient:
        from ctxstore.client import CtxstoreClient

        return CtxstoreClient(
            self.url,
            self.api_key,
            database=database or self.database,
            collection=collection if collection is not None else self.collection,
            timeout=self.timeout,
            transport=self.plain_http_transport(),
        )

    def plain_http_transport(self) -> Transport | None:
        """For an http:// server, a transport whose TLS context holds no certificates. httpx's default context
        reads the whole CA bundle (about 45 ms, a sixth of `ctxstore query`'s start) for a connection that never
        uses TLS: the client reaches only this URL through it (presigned uploads use their own request). Any TLS
        it did attempt (an https:// proxy) would fail verification: closed, never unverified. None for https://:
        the client's own transport, with the CA bundle."""
        if not self.url.startswith("http://"):
            return None
        import ssl

        import httpx

        from ctxstore.client.transport import Transport

        no_certificates = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and hostname checks, no CA
        http = httpx.Client(base_url=self.url, timeout=self.timeout, verify=no_certificates)
        return Transport(self.url, self.api_key, timeout=self.timeout, http=http)


def resolve(
    *,
    url: str | None,
    api_key: str | None,
    config: str | None,
    timeout: float,
    environ: dict[str, str] | None = None,
) -> Settings:
    env = os.environ if environ is None else environ
    path = config_path(config)
    stored = read_config(path)
    out = Settings(timeout=timeout, config_file=path)

    def pick(name: str, flag: str | None, var: str, default: str | None = None) -> str | None:
        for value, source in ((flag, "flag"), (env.get(var), var), (stored.get(name), str(path))):
            if value:
                out.sources[name] = source
                return str(value)
        out.sources[name] = "default" if default else "unset"
        return default

    raw_url = pick("url", url, "CTXSTORE_URL", DEFAULT_URL) or DEFAULT_URL
    out.url, out.scheme_assumed = checked_url(raw_url, out.sources["url"])
    out.api_key = pick("api_key", api_key, "CTXSTORE_API_KEY")
    out.database = pick("database", None, "CTXSTORE_DATABASE")
    collection = env.get("CTXSTORE_COLLECTION", stored.get("collection"))
    out.collection = str(collection) if collection is not None else None
    return out
