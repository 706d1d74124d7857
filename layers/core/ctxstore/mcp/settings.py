"""Settings of the MCP endpoint on `ctxstore serve` (CTXSTORE_MCP_*), read from the environment."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


class McpSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXSTORE_MCP_", extra="ignore")

    # `ctxstore serve` mounts Streamable HTTP at /mcp unless CTXSTORE_MCP_ENABLED=false.
    enabled: bool = True
    # DNS-rebinding protection: the Host header must name this server. Loopback names (any port) are always
    # allowed; add the names remote agents use, comma-separated, `name:*` for any port
    # (CTXSTORE_MCP_ALLOWED_HOSTS=ctx.example.com,ctx.example.com:*). "*" turns the Host check off
    # (only behind a proxy that sets Host itself).
    allowed_hosts: str = ""
    # Browser Origins allowed to call /mcp (requests without Origin, as agents send, always pass).
    allowed_origins: str = ""

    def host_patterns(self) -> list[str] | None:
        """Allowed Host values, or None when the check is off."""
        extra = _split(self.allowed_hosts)
        if "*" in extra:
            return None
        return [*LOOPBACK_HOSTS, *(f"{h}:*" for h in LOOPBACK_HOSTS), *extra]

    def origin_patterns(self) -> list[str]:
        loopback = [
            f"{scheme}://{h}{port}" for scheme in ("http", "https") for h in LOOPBACK_HOSTS for port in ("", ":*")
        ]
        return [*loopback, *_split(self.allowed_origins)]
