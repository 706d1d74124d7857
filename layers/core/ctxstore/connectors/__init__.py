"""Connector providers: one module per provider on its official client library, behind ports/connector_provider.

Adapter-like: only bootstrap (through registry.build_providers) imports them; services never do.
"""
