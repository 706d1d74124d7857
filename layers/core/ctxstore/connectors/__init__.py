"""Connector providers: one module (or small group of modules) per provider on its official client library,
each implementing ``ctxstore.ports.connector_provider.ConnectorProvider``. Adapter-like: only bootstrap wires
them; services never import them."""
