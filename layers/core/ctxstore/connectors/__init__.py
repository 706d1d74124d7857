"""Connector providers: one module per provider on its official client library, behind ports/connector_provider.

Adapter-like: only the composition root (ctxstore.runtime, through registry.build_providers) imports them;
services never do.
"""
