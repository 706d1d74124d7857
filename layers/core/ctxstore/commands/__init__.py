"""The client verbs of the `ctxstore` command (typer + rich) over ctxstore.client.

They import typer and the standard library when loaded; the client, rich and anything else inside the verb, so
`ctxstore --help` stays quick. No server code at all: an import contract in pyproject.toml says so.
"""
