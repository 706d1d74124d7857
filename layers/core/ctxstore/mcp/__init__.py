"""The MCP server of ctxstore: tools over the same services as the HTTP API.

- `ctxstore serve` answers Streamable HTTP at /mcp (in-process, as the request's Bearer key): `http_app`.
- `ctxstore mcp` speaks stdio to a desktop agent and reaches a running server with ctxstore.client: `stdio`.
"""
