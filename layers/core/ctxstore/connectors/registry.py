"""The providers this server runs: provider id -> implementation. Bootstrap calls build_providers()."""

from __future__ import annotations

from ctxstore.ports.connector_provider import ConnectorProvider


def build_providers() -> dict[str, ConnectorProvider]:
    from ctxstore.connectors import gmail, slack

    providers: list[ConnectorProvider] = [slack.build_provider(), gmail.build_provider()]
    return {p.info.provider: p for p in providers}
