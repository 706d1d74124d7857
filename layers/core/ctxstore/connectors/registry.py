"""The providers this server runs: provider id -> implementation. Bootstrap calls build_providers()."""

from __future__ import annotations

from ctxstore.ports.connector_provider import ConnectorProvider


def build_providers(enabled: set[str] | None = None) -> dict[str, ConnectorProvider]:
    """Every provider, or those named in ``enabled`` (an unknown name is a configuration error)."""
    # github and gmail import their SDKs only when a call is made, so registering them costs nothing at start-up.
    from ctxstore.connectors.github import provider as github
    from ctxstore.connectors.gmail import provider as gmail
    from ctxstore.connectors.linear import provider as linear
    from ctxstore.connectors.notion import provider as notion
    from ctxstore.connectors.slack import provider as slack

    providers: list[ConnectorProvider] = [
        slack.build_provider(),
        github.build_provider(),
        linear.build_provider(),
        notion.build_provider(),
        gmail.build_provider(),
    ]
    built = {p.info.provider: p for p in providers}
    unknown = sorted((enabled or set()) - set(built))
    if unknown:
        raise ValueError(f"CTXSTORE_CONNECTOR_PROVIDERS names unknown providers: {', '.join(unknown)}")
    return {name: p for name, p in built.items() if enabled is None or name in enabled}
