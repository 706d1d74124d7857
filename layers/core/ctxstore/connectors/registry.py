"""The providers this server runs: provider id -> implementation. Bootstrap calls build_providers()."""

from __future__ import annotations

from ctxstore.ports.connector_provider import ConnectorProvider


def build_providers() -> dict[str, ConnectorProvider]:
    # github and gmail import their SDKs only when a call is made, so registering them costs nothing at start-up.
    from ctxstore.connectors import github, gmail, linear, notion, slack

    providers: list[ConnectorProvider] = [
        slack.build_provider(),
        github.build_provider(),
        linear.build_provider(),
        notion.build_provider(),
        gmail.build_provider(),
    ]
    return {p.info.provider: p for p in providers}
